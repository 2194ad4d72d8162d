// One HTTP request over one libcurl easy handle, with the answer checked before a byte reaches the
// caller's memory: status, Content-Range against the range asked for, total size and ETag against what
// open() saw. The connection stays open in the handle for the next request (keep-alive).
// Thread safety: a Connection is used by one thread at a time.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "ferry/remote.hpp"
#include "remote/sigv4.hpp"
#include "remote/url.hpp"

namespace ferry::detail::remote {

inline constexpr std::uint64_t kUnknownSize = std::numeric_limits<std::uint64_t>::max();

/// Where requests go and how they are signed.
struct Target {
  std::string request_url;  ///< what curl fetches (may hold a query with credentials: never shown)
  std::string shown;        ///< the URL the caller gave, in display form, for messages
  HttpUrl url;              ///< request_url split (the canonical URI and Host for signing)
  Credentials credentials;  ///< non-empty: SigV4-signed (S3)
  std::string region;
  bool s3 = false;
};

/// The headers of the last answer that matter here.
struct Response {
  long status = 0;
  std::string reason;         ///< "Not Found"
  std::string etag;
  std::string content_range;
  std::string accept_ranges;
  bool has_content_length = false;
  std::uint64_t content_length = 0;
  std::string error_body;     ///< the first 4 KiB of a non-2xx body (S3 puts its error code there)
};

/// One request. For GET with `dst`, the body goes to dst[0, length) and nowhere else.
struct Request {
  bool head = false;
  bool ranged = true;             ///< send Range: bytes=offset-(offset+length-1)
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  char* dst = nullptr;            ///< nullptr: the body is discarded (a probe) and the transfer stopped
  std::string if_match;           ///< the ETag to insist on; empty for none
  std::uint64_t expect_total = kUnknownSize;  ///< the object size the answer must confirm
};

enum class Outcome { done, retry, fail };

struct TransferResult {
  Outcome outcome = Outcome::fail;
  std::uint64_t bytes = 0;          ///< written into dst (counted also when the outcome is retry)
  Status cause;                     ///< why, for retry and fail: a code and a short text, no URL
  Response response;
  std::uint64_t new_connections = 0;
  bool whole_body = false;          ///< a 200 answer to a range request, cut at `length`
};

class Connection {
 public:
  /// Errors: `internal` when libcurl cannot make a handle.
  static Result<std::unique_ptr<Connection>> make();
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  TransferResult perform(const Target& target, const Request& request, const ferry::remote::Options& options);

 private:
  explicit Connection(void* easy) : easy_(easy) {}
  void* easy_;
};

/// The S3 error code and message in an XML error body ("SignatureDoesNotMatch: The request ..."), or "".
std::string s3_error_text(const std::string& body);

/// Parses "bytes A-B/T" (T may be '*'): true with the numbers, total = kUnknownSize for '*'. Also
/// "bytes */T" (a 416 answer): first = last = kUnknownSize.
bool parse_content_range(const std::string& text, std::uint64_t& first, std::uint64_t& last, std::uint64_t& total);

}  // namespace ferry::detail::remote
