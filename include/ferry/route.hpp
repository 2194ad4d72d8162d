// ferry/route.hpp: which way a request moves bytes, the route every operation took, the reason for each
// decision, and reports.
//
// Every operation (one task of a request) ends in exactly one Route. Decisions carry a Reason and a
// detail text ("cuFileHandleRegister failed with 5027: ..."). Reports count operations, bytes and time
// per route, per call (Transfer::report), per File (File::report) and per process (process_report).
// Thread safety: Report is a value; process_report() may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// The one list of routes and the one list of reasons: the enums below, kRouteCount, kReasonCount, route_name(),
// reason_name() and reason_text() (src/report/report.cpp) are generated from them, so that no name table lags
// an enum. FERRY_ROUTES(X) calls X(enumerator, name) per route (lowercase, hyphens); FERRY_REASONS(X) calls
// X(enumerator, text) per reason (its name is the enumerator, its text a phrase for people), each group after
// a comment naming the route it explains. Comments inside the lists are /* */ ones: a // comment would
// swallow the line continuation.
// clang-format off
#define FERRY_ROUTES(X)          \
  X(nvfs, "nvfs")                \
  X(p2p, "p2p")                  \
  X(cufile_posix, "cufile-posix") \
  X(staged, "staged")            \
  X(host, "host")

#define FERRY_REASONS(X)                                                                                        \
  /* host */                                                                                                    \
  X(buffer_is_host_memory, "buffer is host memory")                                                             \
  /* staged (nvidia_fs_not_loaded: neither nvidia-fs nor P2PDMA; below_gds_threshold: gds_threshold) */         \
  X(compat_mode_on, "compat mode on: cuFile not used")                                                          \
  X(below_gds_threshold, "request below the GDS threshold")                                                     \
  X(cufile_library_missing, "cuFile library missing")                                                           \
  X(cufile_driver_open_failed, "cuFile driver open failed")                                                     \
  X(cufile_handle_register_failed, "cuFile handle registration failed")                                         \
  X(nvidia_fs_not_loaded, "nvidia-fs not loaded (cuFile would only use its POSIX path)")                        \
  X(cufile_forced_compat, "CUFILE_FORCE_COMPAT_MODE is set (cuFile would only use its POSIX path)")             \
  X(managed_memory, "buffer is managed memory, which cuFile does not take")                                     \
  X(source_not_a_file, "the source is not a local file, which cuFile needs")                                    \
  /* cuFile (gds_available: nvidia-fs or P2PDMA present and the handle registered) */                           \
  X(compat_mode_off, "compat mode off: cuFile required")                                                        \
  X(gds_available, "GPUDirect Storage available")                                                               \
  /* nvfs, p2p, cufile-posix */                                                                                 \
  X(cufile_stats, "attributed by cuFile's statistics")                                                          \
  /* staged (cufile_unaligned_edge: cuFile moves whole blocks, which would write past the edges) */             \
  X(cufile_unaligned_edge,                                                                                      \
    "unaligned edge of a cuFile read, moved through a bounce buffer so that no byte past it is written")        \
  X(batch_pieces, "pieces of a batch, packed into bounce buffers (cuFile would read them one request at a time)")
// clang-format on

namespace ferry {

/// Which way a request moves bytes (named instead of a bool whose polarity a reader has to look up).
/// `read`: from the file into memory. `write`: from memory into the file.
enum class Direction { read, write };

#define FERRY_ENUMERATOR_(enumerator, ...) enumerator,
#define FERRY_ONE_(...) +1
enum class Route { FERRY_ROUTES(FERRY_ENUMERATOR_) };
inline constexpr std::size_t kRouteCount = 0 FERRY_ROUTES(FERRY_ONE_);

/// The name FERRY_ROUTES gives the route (docs/routes.md, Names); "?" for a value outside the enum.
const char* route_name(Route r) noexcept;

/// Why a route was chosen (FERRY_REASONS above). reason_name() is the spelling in logs, JSON and Python.
enum class Reason { FERRY_REASONS(FERRY_ENUMERATOR_) };
inline constexpr std::size_t kReasonCount = 0 FERRY_REASONS(FERRY_ONE_);
#undef FERRY_ONE_
#undef FERRY_ENUMERATOR_
/// "?" for a value outside the enum.
const char* reason_name(Reason r) noexcept;
/// A phrase for people: "buffer is host memory". "?" for a value outside the enum.
const char* reason_text(Reason r) noexcept;

struct RouteCounters {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  std::uint64_t nanoseconds = 0;  // summed over tasks (not wall time)
};

/// How many operations one (route, reason, detail) accounted for.
struct ReasonCount {
  Route route;
  Reason reason;
  std::string detail;
  std::uint64_t ops = 0;
};

/// Per-task I/O mechanics below the route: how the bytes left the file.
struct IoCounters {
  std::uint64_t direct_ops = 0;     // O_DIRECT reads/writes
  std::uint64_t buffered_ops = 0;   // buffered reads/writes
  std::uint64_t cached_ops = 0;     // of buffered reads: served whole from the page cache (RWF_NOWAIT)
  std::uint64_t eintr_retries = 0;  // system calls restarted after EINTR/EAGAIN
  std::uint64_t short_transfers = 0;// partial transfers that were continued
  std::uint64_t gathered_ops = 0;   // ops a worker took together with other requests' ops (small reads in flight)
  std::uint64_t pinned_wait_ns = 0; // time the work waited for room in the pinned budget (pinned_budget)
};

/// cuFile's own counters (statistics level 3), as a delta over the operations of a report. A field added
/// here is added to kCuFileCounterFields (src/report/cufile_counter_fields.hpp) too.
struct CuFileCounters {
  std::uint64_t nvfs_reads = 0, posix_reads = 0, p2p_reads = 0;
  std::uint64_t nvfs_writes = 0, posix_writes = 0, p2p_writes = 0;
  std::uint64_t read_bytes = 0, write_bytes = 0;
  std::uint64_t read_errors = 0, write_errors = 0;
};

/// How a stream-ordered request (File::read_async / write_async) was placed in its stream's order
/// (docs/stream-order.md). The spelling of stream_order_name() is the one in JSON and Python.
enum class StreamOrder {
  stream_copies,  // device memory: the copies queued on the caller's stream, between waits for Ferry's reads
  stream_wait,    // host memory: the stream waits on a word Ferry writes once the request has ended
  synchronized,   // the calling thread synchronised the stream, then did the request and waited for it
};
inline constexpr std::size_t kStreamOrderCount = 3;
const char* stream_order_name(StreamOrder m) noexcept;

struct Report {
  std::array<RouteCounters, kRouteCount> routes{};
  std::vector<ReasonCount> reasons;
  IoCounters io;
  std::optional<CuFileCounters> cufile;  // present when cuFile took part and its statistics were read
  std::vector<std::string> notes;         // facts found on the way ("O_DIRECT refused on tmpfs: ...")
  std::array<std::uint64_t, kStreamOrderCount> stream_order{};  // stream-ordered requests, per StreamOrder

  const RouteCounters& at(Route r) const { return routes[static_cast<std::size_t>(r)]; }
  std::uint64_t total_ops() const;
  std::uint64_t total_bytes() const;

  /// Adds `ops` operations (one by default) of `bytes` in all to `route` for `reason`.
  void count(Route route, Reason reason, const std::string& detail, std::uint64_t bytes,
             std::uint64_t nanoseconds, std::uint64_t ops = 1);
  void add_note(const std::string& note);  // kept once
  void merge(const Report& other);

  /// One line: "256 operations, 1.00 GiB, all host (buffer is host memory)".
  std::string summary() const;
  /// A table for people: one row per route with ops, bytes and reasons, then I/O mechanics and notes.
  std::string table() const;
  /// The same as JSON (stable keys: routes, reasons, io, cufile, notes, stream_order, total_ops,
  /// total_bytes).
  std::string to_json() const;
};

/// The route a request would take, decided before any I/O (File::prepare).
struct RoutePlan {
  Route route = Route::host;
  Reason reason = Reason::buffer_is_host_memory;
  std::string detail;
  std::string memory;  // the buffer: "host-pageable", "host-pinned", "device" or "managed"
  int device = -1;     // GPU ordinal of device or managed memory, else -1
  /// "staged: nvidia-fs not loaded (...): detail"
  std::string to_string() const;
};

/// The one-time work this process has done, step by step (a fresh process's first read pays it all).
/// Steps, in order: cuda_init (load the driver library, cuInit), cuda_context (retain a GPU's primary
/// context), cufile_load, cufile_driver_open, cufile_register (per file), pinned_buffers (bounce buffers
/// mapped, pinned and registered; count = buffer kits, bytes = pinned bytes), threads (workers started).
struct SetupCosts {
  struct Step {
    double seconds = 0;
    std::uint64_t count = 0;
    std::uint64_t bytes = 0;
  };
  std::array<Step, 7> steps{};

  /// What happened after `earlier` was taken.
  SetupCosts since(const SetupCosts& earlier) const;
  double total_seconds() const;
  bool empty() const;
  /// "CUDA loaded and initialised 112.3 ms; pinned bounce buffers 31.0 ms (16, 128 MiB)".
  std::string summary() const;
  /// {"cuda_init": {"seconds": .., "count": .., "bytes": ..}, ..., "total_seconds": ..}
  std::string to_json() const;
};
SetupCosts process_setup_costs();

/// The outcome of a successful request (File::pread, File::pwrite, ...).
struct Transfer {
  std::uint64_t bytes = 0;  // bytes transferred: fewer than asked only when a read reaches EOF
  Report report;            // routes and reasons of this request's operations
};

/// Everything this process transferred through Ferry so far.
Report process_report();
void reset_process_report();

}  // namespace ferry
