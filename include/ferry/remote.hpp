// ferry/remote.hpp: reading HTTP(S) and S3 objects into host memory.
//
// An Object is a remote file opened by URL: `http://` and `https://` (any server that answers HTTP range
// requests), and `s3://bucket/key` (Amazon S3 or an S3-compatible store, signed with AWS Signature
// Version 4). open() learns the object's size and ETag with one HEAD request (or a one-byte ranged GET
// where HEAD is refused); read() fetches a byte range with HTTP range requests split into parts over
// several parallel connections, each part written straight into the caller's memory at its offset, and
// each byte written at most once. Every request after open() carries `If-Match` with the ETag open()
// saw, and every answer's ETag and Content-Range are checked, so an object replaced during a read is an
// error, never a mix of two versions. docs/remote.md describes URLs, settings, credentials and faults.
//
// This layer reads into host memory only. A later version plugs it into ferry::File (File::open(url))
// and with that the staged route into GPU memory; until then copy from host memory yourself.
//
// Thread safety: an Object may be read from many threads at once (each read uses its own connections,
// taken from the object's pool); counters() may be called at any time. Moving or destroying an Object
// must not race its reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ferry/status.hpp"

namespace ferry::remote {

/// How an `s3://bucket/key` URL becomes an HTTP request: `path` (`https://endpoint/bucket/key`),
/// `virtual_host` (`https://bucket.endpoint/key`), or `automatic`: path style when an endpoint override
/// is set (local S3-compatible stores rarely resolve bucket host names), else virtual-host style (path
/// style for bucket names with dots, which TLS certificates of `*.s3.<region>.amazonaws.com` don't cover).
enum class Addressing { automatic, path, virtual_host };

/// The snake_case name of an addressing style, as in settings and messages.
const char* addressing_name(Addressing addressing) noexcept;

/// Settings of remote reads. A default-constructed Options holds the documented defaults; the S3 fields
/// left empty are looked up when an `s3://` object is opened (environment, then ~/.aws files; see
/// docs/remote.md). from_environment() applies the `FERRY_REMOTE_*` / `FERRY_S3_*` variables.
struct Options {
  /// Parallel connections per read() (FERRY_REMOTE_CONNECTIONS, 1-256). A read uses at most one per part.
  unsigned connections = 8;
  /// Bytes per range request (FERRY_REMOTE_PART_SIZE, >= 64 KiB): a read of N bytes sends about
  /// N / part_size_bytes GETs, spread over the connections.
  std::uint64_t part_size_bytes = 8ull << 20;
  /// Retries of one part after a 5xx / 408 / 429 answer, a reset or refused connection, a timeout or a
  /// truncated body (FERRY_REMOTE_MAX_RETRIES, 0-100). A retry asks only for the bytes still missing.
  unsigned max_retries = 5;
  /// The first retry waits about this long, each next one twice as long, up to retry_max_delay_ms, with
  /// random jitter of up to half the delay (FERRY_REMOTE_RETRY_DELAY_MS, FERRY_REMOTE_RETRY_MAX_DELAY_MS).
  std::uint32_t retry_base_delay_ms = 100;
  std::uint32_t retry_max_delay_ms = 5000;
  /// Connecting may take this long (FERRY_REMOTE_CONNECT_TIMEOUT_MS).
  std::uint32_t connect_timeout_ms = 10000;
  /// A transfer that receives nothing for this long is abandoned and retried (FERRY_REMOTE_STALL_TIMEOUT_MS).
  std::uint32_t stall_timeout_ms = 30000;
  /// Check TLS certificates and host names (FERRY_REMOTE_VERIFY_TLS=0 turns it off, for test servers only).
  bool verify_tls = true;

  // S3 (`s3://` URLs only).
  /// The region that requests are signed for; empty: AWS_REGION, AWS_DEFAULT_REGION, the profile's
  /// `region`, else us-east-1.
  std::string region;
  /// Where requests go (`http://127.0.0.1:9000`); empty: FERRY_S3_ENDPOINT, AWS_ENDPOINT_URL_S3,
  /// AWS_ENDPOINT_URL, the profile's `endpoint_url`, else `https://s3.<region>.amazonaws.com`.
  std::string endpoint;
  /// The ~/.aws profile; empty: AWS_PROFILE, else `default`.
  std::string profile;
  /// FERRY_S3_ADDRESSING=automatic|path|virtual_host.
  Addressing addressing = Addressing::automatic;
  /// Credentials; when access_key_id is empty: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
  /// AWS_SESSION_TOKEN, then the profile in ~/.aws/credentials, then in ~/.aws/config. With none found,
  /// requests go unsigned (public buckets).
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  /// Send unsigned requests even where credentials exist (FERRY_S3_ANONYMOUS=1).
  bool anonymous = false;

  /// The defaults with every `FERRY_REMOTE_*` / `FERRY_S3_*` variable that is set applied. Errors:
  /// `invalid_argument` naming the variable and its value when one is malformed or out of range.
  static Result<Options> from_environment();
};

/// What the reads of one Object (or of one call) cost. All counts since open().
struct Counters {
  std::uint64_t bytes = 0;        ///< body bytes written into the caller's memory
  std::uint64_t requests = 0;     ///< HTTP requests sent, open()'s included, retries included
  std::uint64_t retries = 0;      ///< requests that repeated a failed one
  std::uint64_t connections = 0;  ///< TCP (or TLS) connections opened; the rest reused one
  std::uint64_t read_calls = 0;   ///< read() calls that moved at least one byte
  std::uint64_t read_nanoseconds = 0;  ///< wall time spent in those read() calls
};

namespace detail {
struct ObjectState;
}

/// True for URLs this layer opens: `http://`, `https://`, `s3://` (case-insensitive scheme).
bool is_remote_url(std::string_view path) noexcept;

/// The URL as Ferry shows it in messages: without user name, password, query string or fragment
/// (presigned URLs carry credentials in their query). `s3://bucket/key` stays as it is.
std::string display_url(std::string_view url);

/// A remote object, open for reading.
class Object {
 public:
  /// Opens `url` for reading with one HEAD request (or a ranged GET of one byte where the server refuses
  /// HEAD, answers it without a length, or does not say whether it supports ranges). `mode` must be "r":
  /// "w", "r+" and "a" are refused with `failed_precondition` ("remote writes are not supported yet").
  /// Errors: `invalid_argument` (not a remote URL, bad settings, no S3 bucket), `not_found` (404, 410),
  /// `permission_denied` (401, 403; with S3's error code, e.g. SignatureDoesNotMatch), `unavailable`
  /// (connection failed or 5xx after the retries), `io_error` (a malformed answer). Messages name the URL
  /// in its display form and never a secret.
  static Result<Object> open(std::string_view url, const Options& options = {}, std::string_view mode = "r");

  Object(Object&&) noexcept;
  Object& operator=(Object&&) noexcept;
  ~Object();

  /// Reads up to `size` bytes at `offset` into `host_dst` (host memory, at least `size` bytes). Returns
  /// the bytes read: `size`, or fewer only where the object ends before `offset + size` (0 at its end).
  /// The range is split into parts of `part_size_bytes` read over up to `connections` connections, each
  /// byte of `host_dst` written at most once and none past the returned count. Errors:
  /// `out_of_range` (offset past the end), `failed_precondition` ("object changed during the read": a
  /// 412 answer to If-Match, or a different ETag or total size in an answer; also a read at an offset
  /// other than 0 from a server that ignores range requests), `not_found`, `permission_denied`,
  /// `unavailable` (retries exhausted), `io_error` (a wrong or missing Content-Range, more or fewer bytes
  /// than asked for once the retries are spent). After an error the contents of `host_dst` are
  /// unspecified.
  ///
  /// A server that answers a range request with 200 and the whole object is handled for reads at
  /// offset 0 (the object's first `size` bytes are taken and the transfer stopped there); at any other
  /// offset the read is refused rather than downloading and discarding the bytes before it.
  Result<std::uint64_t> read(void* host_dst, std::uint64_t size, std::uint64_t offset);

  /// The object's size in bytes, as open() learned it.
  std::uint64_t size() const noexcept;
  /// The ETag open() saw, quotes included; empty when the server sent none (then changes are detected
  /// only through the total size in Content-Range).
  const std::string& etag() const noexcept;
  /// Whether the server answers range requests (Accept-Ranges: bytes, or a 206 answer). Without them a
  /// read goes over one connection and only from offset 0.
  bool ranges_supported() const noexcept;
  /// The URL in its display form (see display_url()).
  const std::string& url() const noexcept;
  /// Where the requests go (for `s3://`: the endpoint URL with bucket and key, in display form).
  const std::string& request_url() const noexcept;
  const Options& options() const noexcept;
  /// Totals since open(); safe to call while reads run.
  Counters counters() const noexcept;

 private:
  explicit Object(std::unique_ptr<detail::ObjectState> state);
  std::unique_ptr<detail::ObjectState> state_;
};

/// Opens `url`, reads up to `size` bytes at `offset` into `host_dst` and closes it again. Returns the
/// bytes read, as Object::read(); `counters`, when given, receives what it cost (open() included).
Result<std::uint64_t> read(std::string_view url, void* host_dst, std::uint64_t size, std::uint64_t offset,
                           const Options& options = {}, Counters* counters = nullptr);

/// Why ferry::remote cannot be used in this build ("built without libcurl ..."), or empty when it can.
std::string unavailable_reason();

}  // namespace ferry::remote
