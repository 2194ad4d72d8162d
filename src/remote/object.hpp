// A remote object open for reading: what open() learned (size, ETag, range support) from one HEAD (or a
// one-byte GET), a pool of keep-alive connections, and read_range(): one range request with bounded
// retries. It runs no threads of its own: RemoteSource calls read_range once per task, on the engine's
// workers, so the engine decides what runs in parallel.
// Thread safety: read_range and counters may be called from many threads at once (each read takes a
// connection of its own from the pool).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/config.hpp"
#include "ferry/remote.hpp"
#include "ferry/status.hpp"
#include "base/fork_guard.hpp"
#include "remote/http_transfer.hpp"

namespace ferry::detail::remote {

/// What the requests of one object cost, since open().
struct ObjectCounters {
  std::uint64_t requests = 0;     ///< HTTP requests sent, open()'s and retries included
  std::uint64_t retries = 0;      ///< requests that repeated a failed one
  std::uint64_t connections = 0;  ///< connections opened; every other request reused one
  std::uint64_t bytes = 0;        ///< body bytes written into callers' memory
};

class Object {
 public:
  /// Opens `url` (http://, https://, s3://) for reading. `mode` must be "r" ("w", "r+", "a":
  /// failed_precondition, "remote writes are not supported yet"). `given`: S3 credentials to sign with
  /// instead of looking them up. Errors: `invalid_argument` (not a remote URL, a NUL byte, a bad bucket
  /// name, a profile without credentials), `not_found` (404, 410), `permission_denied` (401, 403, with
  /// S3's error code), `unavailable` (no connection, 5xx, stalls after the retries), `io_error` (a
  /// malformed answer). Messages name the URL's display form, never a secret.
  static Result<std::unique_ptr<Object>> open(std::string_view url, std::string_view mode,
                                              const RemoteSettings& settings,
                                              const ferry::remote::Credentials* given = nullptr);

  /// Reads [offset, offset + length), or what of it the object holds, into dst with one range request, retried for the
  /// missing bytes only (so each byte of dst is written at most once) until done, failed for good, or out
  /// of retries. `stop`, when set during the transfer or a backoff, ends the read with `cancelled`.
  /// Errors: `failed_precondition` (the object changed: 412, another ETag or size; a read not at offset 0
  /// from a server without range support), `unavailable`, `io_error`, `not_found`, `permission_denied`,
  /// `cancelled`, each naming the bytes, the offset and the URL. Returns the bytes read.
  Result<std::uint64_t> read_range(char* dst, std::uint64_t length, std::uint64_t offset,
                                   const std::atomic<bool>* stop);

  std::uint64_t size() const noexcept { return size_; }
  bool ranges_supported() const noexcept { return ranges_; }
  /// Quotes included; empty while no answer carried one.
  std::string etag() const { return etag_.current(); }
  /// The URL in display form.
  const std::string& shown() const noexcept { return target_.shown; }
  /// What opening found worth a note in the report: how S3 requests are signed.
  const std::string& note() const noexcept { return note_; }
  ObjectCounters counters() const noexcept;

  ~Object() { delete pool_.load(); }  // this process's pool: a forked child leaves its parent's alone
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

 private:
  Object() = default;
  Result<std::unique_ptr<Connection>> acquire();
  void release(std::unique_ptr<Connection> c);
  /// Runs `request` on `c` with retries; `last` receives the final answer.
  Status run(Connection& c, Request request, const std::string& context, Response* last = nullptr);

  RemoteSettings settings_;
  Target target_;
  std::string note_;
  std::uint64_t size_ = 0;
  bool ranges_ = false;
  EtagGuard etag_;

  // The idle connections of the process that opened them. A forked child starts a pool of its own: its parent's
  // sockets (and TLS sessions) are still the parent's, and two processes' requests on one socket read each
  // other's answers; nor are they closed there, which would end the parent's sessions.
  struct Pool {
    explicit Pool(std::uint64_t generation_in) : generation(generation_in) {}
    const std::uint64_t generation;  // fork_generation() of the process it belongs to
    std::mutex mutex;
    std::vector<std::unique_ptr<Connection>> idle;  // guarded by mutex
  };
  Pool& pool();
  std::atomic<Pool*> pool_{new Pool(fork_generation())};
  std::atomic<std::uint64_t> requests_{0}, retries_{0}, connections_{0}, bytes_{0};
};

}  // namespace ferry::detail::remote
