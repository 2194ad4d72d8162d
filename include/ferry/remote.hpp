// ferry/remote.hpp: HTTP(S) and S3 objects, read through ferry::File.
//
// A URL opens wherever a path does: File::open("https://host/x.bin"), File::open("s3://bucket/key"),
// `ferry read URL`, ferry.open(url). Each task of a request is one HTTP range request on a keep-alive
// connection; every answer's ETag, Content-Range and total size are checked before a byte is used, so an
// object replaced during a read is an error, never a mix of two versions. Writes are refused. How it reads,
// URLs, credentials, retries, deadlines and faults: docs/remote.md; settings: docs/settings.md.
//
// Thread safety: pure functions, and open() as File::open.
#pragma once

#include <string>
#include <string_view>

#include "ferry/config.hpp"
#include "ferry/file.hpp"
#include "ferry/status.hpp"

namespace ferry::remote {

/// True for the URLs File::open reads as remote objects: `http://`, `https://`, `s3://` (any case).
bool is_remote_url(std::string_view path) noexcept;

/// The URL as Ferry shows it in every message, report and listing: without user name, password, query
/// string or fragment (a presigned URL carries its credentials in the query). Only requests see the rest.
/// A local path (no `scheme://`) comes back as it is, so any name may be passed.
std::string display_url(std::string_view url);

/// S3 credentials handed over in code, used instead of the environment and the ~/.aws files. They are
/// not settings (no report or settings listing shows them) and are used only to sign requests.
struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  ///< empty unless the credentials are temporary
};

/// File::open(url, mode, config) for an `s3://` URL, signed with `credentials` (for http(s) URLs they
/// are not used). Errors: File::open's for URLs (docs/remote.md); `invalid_argument` for an access key
/// id without its secret.
[[nodiscard]] Result<File> open(const std::string& url, const Credentials& credentials, const Config& config,
                                std::string_view mode = "r");

/// Why this build cannot read remote objects ("built without libcurl ..."), or empty when it can.
std::string unavailable_reason();

}  // namespace ferry::remote
