// One HTTP request over one libcurl handle, with the answer checked before a byte reaches the caller's
// memory: status, Content-Range against the range asked for, total size and ETag against the object's.
// The connection stays open in the handle for the next request (keep-alive). A transfer ends early, at
// the latest 50 ms after the fact, when its request is stopped (cancelled), when no byte came for
// remote_stall_timeout_ms, or when its deadline (stall timeout + bytes / remote_min_rate) passed.
// Thread safety: a Connection is used by one thread at a time; an EtagGuard by any number.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "ferry/config.hpp"
#include "ferry/status.hpp"
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
};

/// The object's ETag as its answers establish it: open()'s, or else the first answer that carries one.
/// Every later answer's must be the same (compared weakly, as RFC 9110 does for ranges of one version).
class EtagGuard {
 public:
  void set(std::string etag);
  std::string current() const;
  /// Agrees with `seen` (adopting it when no ETag is known yet): nullopt; else the ETag it differs from.
  std::optional<std::string> mismatch(const std::string& seen);

 private:
  mutable std::mutex mutex_;
  std::string etag_;
};

/// A strong ETag is one If-Match may carry: a weak one (W/"...") never matches there (RFC 9110 13.1.1).
bool is_strong_etag(const std::string& etag);

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
  EtagGuard* etag = nullptr;      ///< the object's ETag: sent in If-Match when strong, answers checked against it
  std::uint64_t expect_total = kUnknownSize;  ///< the object size the answer must confirm
  const std::atomic<bool>* stop = nullptr;    ///< set: end the transfer (the request was cancelled)
};

enum class Outcome { done, retry, fail };

struct TransferResult {
  Outcome outcome = Outcome::fail;
  std::uint64_t bytes = 0;          ///< written into dst (counted also when the outcome is retry)
  Status cause;                     ///< why, for retry and fail: a code and a short text, no URL
  Response response;
  std::uint64_t new_connections = 0;
};

class Connection {
 public:
  /// Errors: `internal` when libcurl cannot make a handle.
  static Result<std::unique_ptr<Connection>> make();
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  TransferResult perform(const Target& target, const Request& request, const RemoteSettings& settings);

 private:
  Connection(void* multi, void* easy) : multi_(multi), easy_(easy) {}
  void* multi_;
  void* easy_;
};

/// The S3 error code and message in an XML error body ("SignatureDoesNotMatch: The request ..."), or "".
std::string s3_error_text(const std::string& body);

/// Text a server sent, fit for a terminal: control bytes (and DEL, and backslashes) become \xNN escapes.
std::string printable(std::string_view server_text);

/// Parses "bytes A-B/T" (T may be '*'): true with the numbers, total = kUnknownSize for '*'. Also
/// "bytes */T" (a 416 answer): first = last = kUnknownSize.
bool parse_content_range(const std::string& text, std::uint64_t& first, std::uint64_t& last, std::uint64_t& total);

}  // namespace ferry::detail::remote
