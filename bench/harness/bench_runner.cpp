// The runner of `ferry-bench`: prepares the file, memory and page cache, then measures baselines and Ferry's
// routes with repeats, CPU time and (optionally) a byte check.
#include "bench_runner.hpp"

#include "bench_report.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/host_memory.hpp"
#include "base/timing.hpp"
#include "bench_first_read.hpp"
#include "cli/support/command_output.hpp"
#include "cli/support/generated_data.hpp"
#include "cli/support/pieces.hpp"
#include "cli/support/progress.hpp"
#include "ferry/page_cache.hpp"
#include "file/output_file.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/device_memory.hpp"
#include "platform/cuda/pinned_memory.hpp"

namespace ferry::cli::bench {
namespace {

using detail::gib_per_s;
using detail::HostMemory;
using detail::now_ns;
using detail::seconds_since;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double cpu_seconds_now() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

// ---- page cache: residency, eviction, warming ----

using Residency = Result<page_cache::Residency>;

// Through the library's probe (ferry/page_cache.hpp), the one Ferry's reads use to choose between the page
// cache and O_DIRECT.
Residency probe_residency(const std::string& path, std::uint64_t size) { return page_cache::residency(path, 0, size); }

bool resident_at_most(const Residency& r, double fraction) { return r.ok() && r->fraction() <= fraction; }

std::string percent_text(const Residency& r) {
  if (!r.ok()) return fmt::format("residency unknown ({})", r.status().to_string());
  return fmt::format("{:.1f}% of the file in the page cache ({})", 100.0 * r->fraction(), r->method);
}

struct ColdState {
  std::string method;  // "drop_caches" or "fadvise_dontneed"
  bool ok = false;     // verified out of the cache (at most 1% resident)
  std::string detail;
};

// Evicts the file from the page cache the strongest way allowed, then checks that it worked.
ColdState make_cold(const std::string& path, std::uint64_t size) {
  ColdState c;
  std::string drop_error;
  if (::geteuid() == 0) {
    ::sync();
    int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
    if (fd >= 0 && ::write(fd, "3", 1) == 1) {
      c.method = "drop_caches";
    } else {
      drop_error = fmt::format("writing /proc/sys/vm/drop_caches failed: {}", std::strerror(errno));
    }
    if (fd >= 0) ::close(fd);
  } else {
    drop_error = "not root, so /proc/sys/vm/drop_caches cannot be written";
  }
  if (c.method.empty()) {
    // page_cache::evict writes dirty pages back first (they cannot be dropped), then drops the file.
    auto evicted = page_cache::evict(path);
    c.method = evicted.ok() ? "fadvise_dontneed" : "none";
    if (!evicted.ok()) drop_error += "; " + evicted.status().to_string();
  }
  Residency r = probe_residency(path, size);
  // Pages still under readahead or writeback when DONTNEED ran stay behind: ask again, a few times.
  for (int attempt = 0; attempt < 3 && c.method == "fadvise_dontneed" && r.ok() && !resident_at_most(r, 0.01);
       ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (void)page_cache::evict(path, /*write_back_first=*/false);
    r = probe_residency(path, size);
  }
  c.ok = resident_at_most(r, 0.01);
  c.detail = fmt::format("{}{}: {}{}", c.method, c.method == "drop_caches" ? " (root)" : "", percent_text(r),
                         drop_error.empty() || c.method == "drop_caches" ? "" : " [" + drop_error + "]");
  return c;
}

// Reads the file through the page cache (untimed) until it is resident, where memory allows.
std::string make_hot(const std::string& path, std::uint64_t size, unsigned threads) {
  Residency before = probe_residency(path, size);
  if (before.ok() && before->cached_bytes >= before->range_bytes) return percent_text(before);
  auto fd = open_file(path, false, false);
  if (fd.ok()) {
    // A failed read only leaves its piece uncached, which the residency returned below shows.
    auto warm = [&](std::uint64_t at, std::uint64_t length, std::vector<std::uint8_t>& buffer) {
      buffer.resize(length);
      (void)::pread(fd->get(), buffer.data(), length, static_cast<off_t>(at));
      return Status();
    };
    (void)for_each_piece(size, kPieceBytes, threads, warm);
  }
  return percent_text(probe_residency(path, size));
}

// Before each write run: what the previous run wrote is on disk and out of the cache.
void settle_after_write(const std::string& path) { (void)page_cache::evict(path); }

// ---- the file ----

// Writes generated data into [0, size) of `fd` with a few threads, then fdatasync. Errors name `path`.
Status fill_generated_file(int fd, const std::string& path, std::uint64_t size, TerminalProgress& progress,
                           const std::string& what) {
  std::atomic<std::uint64_t> written{0};
  auto write_piece = [&](std::uint64_t at, std::uint64_t length, std::vector<std::uint8_t>& buffer) {
    buffer.resize(length);
    fill_generated(buffer.data(), length, at);
    for (std::uint64_t done = 0; done < length;) {
      ssize_t w = ::pwrite(fd, buffer.data() + done, length - done, static_cast<off_t>(at + done));
      if (w < 0 && errno == EINTR) continue;
      // Only the errno is kept: the message below names the file.
      if (w <= 0) return Status::from_errno(w < 0 ? errno : EIO, "pwrite");
      done += static_cast<std::uint64_t>(w);
    }
    written += length;
    return Status();
  };
  unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  Status wrote;
  std::atomic<bool> finished{false};
  std::thread writer([&] {
    wrote = for_each_piece(size, kPieceBytes, threads, write_piece);
    finished = true;
  });
  while (!finished) {
    progress.transient(fmt::format("{} \"{}\": {:.0f}% of {}", what, path,
                              100.0 * static_cast<double>(written.load()) / static_cast<double>(size),
                              format_size(size)));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  writer.join();
  int e = wrote.sys_errno();
  if (e == 0 && ::fdatasync(fd) != 0) e = errno;
  if (e != 0)
    return Status::from_errno(e, fmt::format("Could not write {} of generated data to \"{}\"", format_size(size), path),
                              path);
  return Status();
}

// A missing FILE: made in a private temporary file and given its name only when complete, and only if the
// name is still free (file/output_file.hpp).
Status create_generated_file(const Plan& plan, TerminalProgress& progress) {
  FERRY_ASSIGN_OR_RETURN(detail::OutputDestination dest, detail::inspect_destination(plan.path));
  FERRY_ASSIGN_OR_RETURN(detail::TempFile temp, detail::TempFile::create(dest));
  std::uint64_t start = now_ns();
  FERRY_RETURN_IF_ERROR(fill_generated_file(temp.fd(), plan.path, plan.size, progress, "creating"));
  FERRY_RETURN_IF_ERROR(temp.commit(dest, /*replace=*/false, /*sync_directory=*/true));
  progress.line(fmt::format("created \"{}\": {} of generated data in {:.1f} s", plan.path, format_size(plan.size),
                            seconds_since(start)));
  return Status();
}

// What bench may do to FILE: create it when missing; otherwise use it as it is, unless --overwrite allows
// writing into it. A read of a shorter file measures what the file holds (4 KiB multiples), and says so.
// Returns whether the file was created. May lower `plan.size`, and adds to `out`'s warnings and notes.
Result<bool> prepare_file(Plan& plan, Outcome& out, TerminalProgress& progress) {
  struct stat st{};
  if (::lstat(plan.path.c_str(), &st) != 0) {
    if (errno != ENOENT)
      return Status::from_errno(errno, fmt::format("Could not use \"{}\" for the benchmark", plan.path), plan.path);
    FERRY_RETURN_IF_ERROR(create_generated_file(plan, progress));
    return true;
  }
  if (::stat(plan.path.c_str(), &st) != 0)
    return Status::from_errno(errno, fmt::format("Could not use \"{}\" for the benchmark", plan.path), plan.path);
  if (!S_ISREG(st.st_mode))
    return Status(S_ISDIR(st.st_mode) ? ErrorCode::is_a_directory : ErrorCode::failed_precondition,
                  fmt::format("\"{}\" is not a regular file", plan.path), 0, plan.path);
  const std::uint64_t have = static_cast<std::uint64_t>(st.st_size);
  const bool write = plan.op == Op::write;
  const std::string holds = fmt::format("it holds {}", format_size(have));
  if (write && !plan.overwrite) {
    return Status(ErrorCode::already_exists,
                  fmt::format("Could not benchmark writes to \"{}\": it exists ({}), and bench writes only into files "
                              "it creates; --op write would overwrite its first {} with generated data{}. Add "
                              "--overwrite to allow that, or name a file that does not exist",
                              plan.path, holds, format_size(plan.size),
                              plan.verify ? fmt::format(", and --verify truncates it to {}", format_size(plan.size)) : ""),
                  0, plan.path);
  }
  if (write) {
    std::string what = fmt::format("--overwrite: the first {} of \"{}\" ({}) are overwritten with generated data{}",
                                   format_size(plan.size), plan.path, holds,
                                   plan.verify ? fmt::format(", and --verify truncates it to {}", format_size(plan.size))
                                               : "");
    print_error(what);  // said even with --no-progress: it destroys data
    out.notes.push_back(what);
  }
  if (have >= plan.size) return false;

  if (plan.overwrite) {
    if (!write) {
      std::string what = fmt::format("--overwrite: \"{}\" ({}) is filled to {} with generated data, replacing its "
                                     "contents", plan.path, holds, format_size(plan.size));
      print_error(what);
      out.notes.push_back(what);
    }
    // In place: no O_CREAT, no O_TRUNC.
    FERRY_ASSIGN_OR_RETURN(detail::UniqueFd fd, detail::open_fd(plan.path, O_WRONLY | O_NOCTTY, "writing"));
    FERRY_RETURN_IF_ERROR(fill_generated_file(fd.get(), plan.path, plan.size, progress, "filling"));
    progress.line(fmt::format("filled \"{}\" to {} with generated data", plan.path, format_size(plan.size)));
    return false;
  }
  // A read of a file bench did not create: measure the file as it is.
  const std::uint64_t usable = have / 4096 * 4096;
  if (usable == 0) {
    return Status(ErrorCode::failed_precondition,
                  fmt::format("Could not benchmark \"{}\": {}, less than the 4 KiB a measurement needs, and bench does "
                              "not change files it did not create (--overwrite fills it to --size with generated data)",
                              plan.path, holds),
                  0, plan.path);
  }
  out.warnings.push_back(fmt::format("\"{}\" holds {}, less than --size {}: measuring its first {} as it is (bench "
                                     "does not change files it did not create; --overwrite fills it to --size with "
                                     "generated data)",
                                     plan.path, format_size(have), format_size(plan.size), format_size(usable)));
  plan.size = usable;
  return false;
}

// ---- measuring ----

// Times one run: wall clock and process CPU time around `body`, which returns the bytes moved and the sync time.
Result<Sample> timed(const std::function<Result<Sample>()>& body) {
  double cpu0 = cpu_seconds_now();
  std::uint64_t t0 = now_ns();
  auto s = body();
  double seconds = seconds_since(t0);
  double cpu = cpu_seconds_now() - cpu0;
  if (!s.ok()) return s.status();
  Sample out = *s;
  out.seconds = seconds;
  out.cpu_seconds = cpu;
  return out;
}

// A measurement that cannot run here (no GPU, no cuFile, a refused route) is skipped; any other error fails it.
const char* skipped_or_failed(const Status& s) {
  const bool unavailable = s.code() == ErrorCode::unavailable || s.code() == ErrorCode::failed_precondition;
  return unavailable ? "skipped" : "failed";
}

class Runner {
 public:
  Runner(const Plan& plan, Outcome& out, TerminalProgress& progress) : p_(plan), out_(out), progress_(progress) {}

  Status run();

 private:
  bool is_read() const { return p_.op == Op::read; }
  bool wants_baseline(const char* name) const {
    return std::find(p_.baselines.begin(), p_.baselines.end(), name) != p_.baselines.end();
  }
  bool needs_gpu() const;
  void setup_gpu();
  std::string label(const Measurement& m) const;
  void step(Measurement& m, std::size_t run, std::size_t of, const Sample& s);
  // Runs `count` timed repeats of `body`, each after `prepare`; a failure ends the measurement.
  bool repeat(Measurement& m, unsigned count, const std::function<void()>& prepare,
              const std::function<Result<Sample>()>& body);
  void finish(Measurement m);
  // Finishes a measurement that ended before its runs did: `status` is "skipped" or "failed".
  void end(Measurement m, const char* status, std::string reason);
  void prepare_condition(const std::string& condition);

  void measure_copy();
  void measure_io(const std::string& condition, unsigned threads, std::uint64_t task_size);
  void measure_naive(const std::string& condition);
  // The write policy "--sync end": one fdatasync after all data, timed inside the run and also apart.
  Status sync_if_asked(int fd, Sample& s) const;
  void measure_ferry(const std::string& route, const std::string& condition, unsigned threads,
                     std::uint64_t task_size);

  unsigned repeats_for(const std::string& condition) const {
    return condition == "cold" ? p_.cold_repeats : p_.repeats;
  }
  void prepare_run(const std::string& condition) {
    if (condition == "cold") {
      last_cold_ = make_cold(p_.path, p_.size);
    } else if (!is_read()) {
      settle_after_write(p_.path);
    }
  }

  const Plan& p_;
  Outcome& out_;
  TerminalProgress& progress_;
  std::size_t total_ = 0, done_ = 0;
  std::string gpu_reason_;  // empty when the GPU is usable
  // The host buffer (run()): pinned for the GPU where one is usable, else a page-aligned mapping.
  std::optional<detail::PinnedMemory> pinned_host_;
  std::optional<HostMemory> pageable_host_;
  std::uint8_t* host_ = nullptr;  // the data of whichever of the two was allocated
  std::optional<detail::DeviceMemory> device_;
  std::string hot_detail_;
  ColdState cold_;       // at the start of the cold condition
  ColdState last_cold_;  // before the latest run
};

bool Runner::needs_gpu() const {
  for (const auto& r : p_.routes)
    if (r != "host") return true;
  return wants_baseline("copy") || wants_baseline("naive");
}

void Runner::setup_gpu() {
  if (!needs_gpu()) {
    gpu_reason_ = "no GPU measurement was asked for";
    return;
  }
  const detail::CudaApi* api = detail::process_cuda_api();
  if (api == nullptr) {
    gpu_reason_ = fmt::format("no usable GPU: {}", detail::process_cuda_status().message());
    return;
  }
  std::uint64_t start = now_ns();
  auto d = detail::DeviceMemory::allocate(p_.device, round_up_4k(p_.size));
  if (!d.ok()) {
    gpu_reason_ = fmt::format("no usable GPU {}: {}", p_.device, d.status().to_string());
    return;
  }
  device_.emplace(std::move(*d));
  out_.notes.push_back(fmt::format("device buffer: {} on GPU {} allocated in {:.2f} s", format_size(p_.size), p_.device,
                                   seconds_since(start)));
}

std::string Runner::label(const Measurement& m) const {
  std::string s = m.name;
  if (!m.condition.empty()) s += " " + m.condition;
  if (m.threads) s += fmt::format(" {}t", m.threads);
  if (m.task_size) s += " " + short_size(m.task_size);
  return s;
}

void Runner::step(Measurement& m, std::size_t run, std::size_t of, const Sample& s) {
  std::string what = run == 0 ? "first run" : fmt::format("run {}/{}", run, of);
  std::string line = fmt::format("[{}/{}] {} {}: {:.2f} GiB/s ({:.2f} s)", done_ + 1, total_, label(m), what,
                                 gib_per_s(s.bytes, s.seconds), s.seconds);
  // A run is transient on a terminal; a log keeps a line per run.
  if (progress_.terminal()) {
    progress_.transient(line);
  } else {
    progress_.line("  " + line);
  }
}

bool Runner::repeat(Measurement& m, unsigned count, const std::function<void()>& prepare,
                    const std::function<Result<Sample>()>& body) {
  for (unsigned i = 0; i < count; ++i) {
    if (prepare) prepare();
    auto s = timed(body);
    if (!s.ok()) {
      m.status = skipped_or_failed(s.status());
      m.reason = s.status().to_string();
      return false;
    }
    m.runs.push_back(*s);
    step(m, i + 1, count, *s);
  }
  return true;
}

void Runner::finish(Measurement m) {
  ++done_;
  std::string line = fmt::format("[{}/{}] {}: ", done_, total_, label(m));
  if (m.status == "ok") {
    std::vector<double> rates;
    for (const auto& s : m.runs) rates.push_back(gib_per_s(s.bytes, s.seconds));
    Summary g = summarize(rates);
    line += fmt::format("median {:.2f} GiB/s (min {:.2f}, max {:.2f})", g.median, g.min, g.max);
    if (m.verify) line += m.verify->ok ? ", verify OK" : ", VERIFY FAILED";
  } else {
    line += m.status + ": " + m.reason;
  }
  progress_.line(line);
  out_.results.push_back(std::move(m));
}

void Runner::end(Measurement m, const char* status, std::string reason) {
  m.status = status;
  m.reason = std::move(reason);
  finish(std::move(m));
}

void Runner::prepare_condition(const std::string& condition) {
  if (condition == "hot") {
    hot_detail_ = make_hot(p_.path, p_.size, std::max(1u, std::min(16u, std::thread::hardware_concurrency())));
  } else if (condition == "cold") {
    cold_ = make_cold(p_.path, p_.size);
    last_cold_ = cold_;
    if (!cold_.ok)
      out_.warnings.push_back(fmt::format(
          "the file could not be verified out of the page cache ({}); Ferry's cold runs use O_DIRECT (direct_io=on) "
          "and the naive cold runs may be served partly from the cache", cold_.detail));
  }
}

void Runner::measure_copy() {
  Measurement m;
  m.name = "copy";
  m.kind = "baseline";
  m.target = "gpu";
  if (!device_ || !pinned_host_) {
    return end(std::move(m), "skipped", gpu_reason_.empty() ? "host memory is not pinned" : gpu_reason_);
  }
  // Every shape is measured with the same repeats; the one with the best median is the ceiling, and the
  // notes give every shape's median so that the choice can be checked.
  std::vector<std::string> shape_notes;
  std::optional<Measurement> best;
  double best_median = -1;
  for (const CopyShape& shape : kCopyShapes) {
    if (shape.chunk > std::max<std::uint64_t>(p_.size, 4ull << 20)) continue;
    auto engine = CopyEngine::create(p_.device, shape.streams);
    if (!engine.ok()) {
      return end(std::move(m), "failed", engine.status().to_string());
    }
    // One untimed copy first: the driver's first use of a stream and of the memory costs extra.
    Status warm = engine->run(host_, device_->pointer(), std::min<std::uint64_t>(p_.size, 256ull << 20),
                              is_read(), shape.chunk);
    if (!warm.ok()) {
      return end(std::move(m), "failed", warm.to_string());
    }
    Measurement trial = m;
    trial.task_size = shape.chunk;
    bool ok = repeat(trial, p_.repeats, nullptr, [&]() -> Result<Sample> {
      FERRY_RETURN_IF_ERROR(engine->run(host_, device_->pointer(), p_.size, is_read(), shape.chunk));
      Sample s;
      s.bytes = p_.size;
      return s;
    });
    if (!ok) return finish(std::move(trial));
    std::vector<double> rates;
    for (const auto& r : trial.runs) rates.push_back(gib_per_s(r.bytes, r.seconds));
    double median = summarize(rates).median;
    shape_notes.push_back(fmt::format("{}x{}: {:.2f}", short_size(shape.chunk), shape.streams, median));
    if (median > best_median) {
      best_median = median;
      trial.notes.clear();
      trial.notes.push_back(fmt::format("pinned {} copies of {} chunks on {} streams (the best of {} shapes)",
                                        is_read() ? "host-to-device" : "device-to-host", short_size(shape.chunk),
                                        shape.streams, std::size(kCopyShapes)));
      best = std::move(trial);
    }
  }
  best->notes.push_back(fmt::format("median GiB/s per shape (chunk x streams): {}", fmt::join(shape_notes, ", ")));
  finish(std::move(*best));
}

void Runner::measure_io(const std::string& condition, unsigned threads, std::uint64_t task_size) {
  Measurement m;
  m.name = is_read() ? "pread" : "pwrite";
  m.kind = "baseline";
  m.target = "host";
  m.condition = condition;
  m.threads = threads;
  m.task_size = task_size;
  const bool direct = condition == "cold" || condition == "direct";
  m.direct_io = direct ? "on" : "off";
  m.notes.push_back(fmt::format("{} {} threads {} one {} host buffer, {}{}", is_read() ? "pread" : "pwrite", threads,
                                is_read() ? "into" : "from",
                                pinned_host_ ? "pinned" : "page-aligned (not pinned: no GPU)",
                                direct ? "O_DIRECT" : "buffered",
                                !is_read() && p_.sync == SyncPolicy::end ? ", then fdatasync" : ""));
  auto offsets = chunk_offsets(p_.size, task_size, p_.pattern == Pattern::random, p_.seed);
  auto fd = open_file(p_.path, !is_read(), direct);
  if (!fd.ok()) {
    const bool refused_direct = direct && fd.status().sys_errno() == EINVAL;
    return end(std::move(m), refused_direct ? "skipped" : "failed", fd.status().to_string());
  }
  if (condition == "hot") m.condition_detail = hot_detail_;
  repeat(m, repeats_for(condition), [&] { prepare_run(condition); }, [&]() -> Result<Sample> {
    FileIo job{fd->get(), !is_read(), direct, host_, p_.size, task_size, threads, &offsets};
    FERRY_ASSIGN_OR_RETURN(std::uint64_t n, parallel_file_io(job));
    Sample s;
    s.bytes = n;
    if (!is_read()) FERRY_RETURN_IF_ERROR(sync_if_asked(fd->get(), s));
    return s;
  });
  if (condition == "cold") m.condition_detail = last_cold_.detail;
  finish(std::move(m));
}

Status Runner::sync_if_asked(int fd, Sample& s) const {
  if (p_.sync != SyncPolicy::end) return Status();
  std::uint64_t t0 = now_ns();
  if (::fdatasync(fd) != 0) return Status::from_errno(errno, "fdatasync failed", p_.path);
  s.sync_seconds = seconds_since(t0);
  return Status();
}

void Runner::measure_naive(const std::string& condition) {
  Measurement m;
  m.name = "naive";
  m.kind = "baseline";
  m.target = device_ ? "gpu" : "host";
  m.condition = condition;
  m.threads = 1;
  m.direct_io = "off";
  if (device_) {
    m.notes.push_back(is_read() ? "one read() loop of the whole file into pageable memory, then one cuMemcpyHtoD"
                                : "one cuMemcpyDtoH into pageable memory, then one write() loop");
  } else {
    m.notes.push_back(fmt::format("no GPU ({}): {} only", gpu_reason_,
                                  is_read() ? "one read() loop of the whole file into pageable memory"
                                            : "one write() loop from pageable memory"));
  }
  if (condition == "direct") {
    return end(std::move(m), "skipped", "the naive way writes through the page cache: see the buffered condition");
  }
  auto pageable = HostMemory::allocate(p_.size, HostMemory::Touch::now);
  if (!pageable.ok()) {
    return end(std::move(m), "failed", pageable.status().to_string());
  }
  if (!is_read() && !device_) fill_generated_parallel(pageable->data(), p_.size, 8);
  auto fd = open_file(p_.path, !is_read(), false);
  if (!fd.ok()) {
    return end(std::move(m), "failed", fd.status().to_string());
  }
  if (condition == "hot") m.condition_detail = hot_detail_;
  if (condition == "cold" && !cold_.ok) m.notes.push_back("eviction unverified: reads may be served from the cache");
  int dev = device_ ? p_.device : -1;
  void* dptr = device_ ? device_->pointer() : nullptr;
  repeat(m, repeats_for(condition), [&] { prepare_run(condition); }, [&]() -> Result<Sample> {
    Sample s;
    if (is_read()) {
      FERRY_ASSIGN_OR_RETURN(s.bytes, naive_read(fd->get(), pageable->data(), p_.size, dev, dptr));
    } else {
      FERRY_RETURN_IF_ERROR(naive_write(fd->get(), pageable->data(), p_.size, dev, dptr));
      s.bytes = p_.size;
      FERRY_RETURN_IF_ERROR(sync_if_asked(fd->get(), s));
    }
    return s;
  });
  if (condition == "cold") m.condition_detail = last_cold_.detail;
  finish(std::move(m));
}

void Runner::measure_ferry(const std::string& route, const std::string& condition, unsigned threads,
                           std::uint64_t task_size) {
  Measurement m;
  m.name = route;
  m.kind = "ferry";
  m.target = route == "host" ? "host" : "gpu";
  m.condition = condition;
  m.threads = threads;
  m.task_size = task_size;
  const Environment& env = out_.env;
  m.default_settings = threads == env.default_threads && task_size == env.default_task_size;

  Config cfg = p_.base_config;
  cfg.set_threads(threads);
  cfg.set_task_size(task_size);
  if (!p_.bounce_from_environment) cfg.set_bounce_buffer_size(task_size);
  if (route == "staged") cfg.set_compat_mode(CompatMode::on);
  if (route == "cufile") cfg.set_compat_mode(CompatMode::off);
  if (route == "auto") cfg.set_compat_mode(CompatMode::automatic);
  if (is_read()) {
    if (!p_.direct_io_override.empty()) (void)cfg.set("direct_io", p_.direct_io_override);
    if (condition == "cold" && !cold_.ok && p_.direct_io_override.empty()) {
      cfg.set_direct_io(DirectIo::on);
      m.notes.push_back("direct_io=on: the file could not be verified out of the page cache");
    }
  } else {
    cfg.set_direct_io(condition == "direct" ? DirectIo::on : DirectIo::off);
  }
  m.direct_io = direct_io_name(cfg.direct_io());
  m.bounce_buffer_size = m.target == "gpu" ? cfg.bounce_buffer_size() : 0;
  if (m.target == "gpu") {
    m.notes.push_back(fmt::format("compat_mode={}, {} bounce buffers of {} per thread", compat_mode_name(cfg.compat_mode()),
                                  cfg.bounce_buffers_per_thread(), short_size(cfg.bounce_buffer_size())));
  }
  if (m.target == "gpu" && !device_) {
    return end(std::move(m), "skipped", gpu_reason_);
  }
  auto file = File::open(p_.path, is_read() ? "r" : "r+", cfg);
  if (!file.ok()) {
    return end(std::move(m), "failed", file.status().to_string());
  }
  std::uint8_t* buffer = m.target == "gpu" ? static_cast<std::uint8_t*>(device_->pointer()) : host_;
  {
    // The route's one-time work (cuFile registration, pinned bounce buffers) before anything is timed.
    std::uint64_t t0 = now_ns();
    auto plan = file->prepare(buffer, p_.size, is_read() ? Direction::read : Direction::write);
    if (!plan.ok()) {
      return end(std::move(m), skipped_or_failed(plan.status()), plan.status().to_string());
    }
    m.setup_seconds = seconds_since(t0);
    m.setup_plan = plan->to_string();
  }
  const unsigned in_flight = std::max(2u, threads * 2);
  auto offsets = p_.pattern == Pattern::random ? chunk_offsets(p_.size, task_size, true, p_.seed)
                                               : std::vector<std::uint64_t>{};
  Report last_report;
  auto one_run = [&]() -> Result<Sample> {
    Sample s;
    Report report;
    if (p_.pattern == Pattern::seq) {
      Future f = is_read() ? file->pread(buffer, p_.size, 0) : file->pwrite(buffer, p_.size, 0);
      FERRY_ASSIGN_OR_RETURN(Transfer t, f.get());
      s.bytes = t.bytes;
      report = std::move(t.report);
    } else {
      std::deque<Future> pending;
      auto drain_one = [&]() -> Status {
        Future f = std::move(pending.front());
        pending.pop_front();
        FERRY_ASSIGN_OR_RETURN(Transfer t, f.get());
        s.bytes += t.bytes;
        report.merge(t.report);
        return Status();
      };
      Status first_error;
      for (std::uint64_t off : offsets) {
        if (pending.size() >= in_flight) {
          Status st = drain_one();
          if (!st.ok()) {
            first_error = st;
            break;
          }
        }
        std::uint64_t n = std::min(task_size, p_.size - off);
        pending.push_back(is_read() ? file->pread(buffer + off, n, off) : file->pwrite(buffer + off, n, off));
      }
      // Every request must stop before its buffer may be reused, even after an error.
      while (!pending.empty()) {
        Status st = drain_one();
        if (!st.ok() && first_error.ok()) first_error = st;
      }
      if (!first_error.ok()) return first_error;
    }
    if (!is_read() && p_.sync == SyncPolicy::end) {
      std::uint64_t t0 = now_ns();
      FERRY_RETURN_IF_ERROR(file->sync());
      s.sync_seconds = seconds_since(t0);
    }
    last_report = std::move(report);
    return s;
  };

  // The first run pays for whatever prepare() could not do ahead (thread start-up, first touches): timed and
  // reported on its own, kept out of the statistics.
  prepare_run(condition);
  auto first = timed(one_run);
  if (!first.ok()) {
    return end(std::move(m), skipped_or_failed(first.status()), first.status().to_string());
  }
  m.first_run = *first;
  m.first_run_summary = last_report.summary();
  step(m, 0, 0, *first);

  const unsigned count = repeats_for(condition);
  const bool clear_before_last = p_.verify && is_read();
  unsigned index = 0;
  auto prepare = [&] {
    ++index;
    if (clear_before_last && index == count) {
      // So that a run that wrote nothing cannot pass the byte check on an earlier run's data.
      if (m.target == "gpu") {
        (void)device_->fill(0xA5, p_.size);
      } else {
        std::memset(buffer, 0xA5, p_.size);
      }
    }
    prepare_run(condition);
  };
  if (condition == "hot") m.condition_detail = hot_detail_;
  bool ok = repeat(m, count, prepare, one_run);
  if (condition == "cold") m.condition_detail = last_cold_.detail;
  m.report = last_report;

  if (ok && p_.verify) {
    progress_.transient(fmt::format("[{}/{}] {}: checking bytes", done_ + 1, total_, label(m)));
    if (is_read()) {
      const std::uint8_t* got = buffer;
      if (m.target == "gpu") {
        Status s = device_->copy_to_host(host_, p_.size);
        if (!s.ok()) {
          m.verify = VerifyOutcome{false, "copying the device buffer back failed: " + s.to_string()};
        }
        got = host_;
      }
      if (!m.verify) m.verify = compare_with_file(p_.path, got, 0, m.runs.back().bytes, 8);
    } else {
      // Writes: one more (untimed) run into the emptied file, so that old contents cannot pass for new ones.
      if (auto fd = detail::open_fd(p_.path, O_WRONLY, "writing"); fd.ok()) {
        (void)::ftruncate(fd->get(), 0);
        (void)::fdatasync(fd->get());
      }
      auto r = one_run();
      Status synced = r.ok() && p_.sync == SyncPolicy::none ? file->sync() : Status();
      if (!r.ok() || !synced.ok()) {
        m.verify = VerifyOutcome{false, "the verification run failed: " + (!r.ok() ? r.status() : synced).to_string()};
      } else {
        m.verify = compare_with_file(p_.path, nullptr, 0, p_.size, 8);
        m.verify->detail += " (an extra untimed run into the truncated file, read back)";
      }
    }
  }
  (void)file->close();
  finish(std::move(m));
}

Status Runner::run() {
  setup_gpu();
  // Host memory: pinned when a GPU is usable, so that the raw I/O baseline lands where the staged route's
  // bounce buffers would.
  std::uint64_t start = now_ns();
  if (device_) {
    auto pinned = detail::PinnedMemory::allocate(p_.device, p_.size);
    if (!pinned.ok()) return pinned.status();
    host_ = pinned_host_.emplace(std::move(*pinned)).data();
  } else {
    auto pageable = HostMemory::allocate(p_.size, HostMemory::Touch::now);
    if (!pageable.ok()) return pageable.status();
    host_ = pageable_host_.emplace(std::move(*pageable)).data();
  }
  out_.notes.push_back(fmt::format("host buffer: {} {} in {:.2f} s", format_size(p_.size),
                                   pinned_host_ ? "pinned with cuMemHostAlloc" : "page-aligned, not pinned (no GPU)",
                                   seconds_since(start)));
  if (!is_read()) {
    // Writes write the generated data, so the file stays what `ferry-bench` reads (and --verify can check it).
    fill_generated_parallel(host_, p_.size, std::max(1u, std::thread::hardware_concurrency()));
    if (device_) {
      Status s = device_->copy_from_host(host_, p_.size);
      if (!s.ok()) return s;
    }
  }

  // Count the measurements first, for the progress line.
  const std::size_t sweep = p_.threads.size() * p_.task_sizes.size();
  total_ = (wants_baseline("copy") ? 1 : 0) +
           p_.conditions.size() * ((wants_baseline("io") ? sweep : 0) + (wants_baseline("naive") ? 1 : 0) +
                                   p_.routes.size() * sweep);

  if (wants_baseline("copy")) measure_copy();
  for (const auto& condition : p_.conditions) {
    prepare_condition(condition);
    if (wants_baseline("io"))
      for (unsigned t : p_.threads)
        for (std::uint64_t ts : p_.task_sizes) {
          if (condition == "hot") hot_detail_ = make_hot(p_.path, p_.size, 8);
          measure_io(condition, t, ts);
        }
    if (wants_baseline("naive")) {
      if (condition == "hot") hot_detail_ = make_hot(p_.path, p_.size, 8);
      measure_naive(condition);
    }
    for (const auto& route : p_.routes)
      for (unsigned t : p_.threads)
        for (std::uint64_t ts : p_.task_sizes) {
          if (condition == "hot") hot_detail_ = make_hot(p_.path, p_.size, 8);
          measure_ferry(route, condition, t, ts);
        }
  }
  if (p_.first_read) {
    make_hot(p_.path, p_.size, 8);
    for (const auto& route : p_.routes) {
      progress_.transient(fmt::format("first read in fresh processes: {}", route));
      Measurement m = measure_first_read(p_, route);
      progress_.line(fmt::format("first read, {}: {}", route, m.status == "ok" ? m.notes.back() : m.reason));
      out_.results.push_back(std::move(m));
    }
  }
  progress_.clear();
  return Status();
}

}  // namespace

// ---- the plan as a whole ----

Result<Outcome> run_plan(const Plan& plan) {
  std::uint64_t start = now_ns();
  Outcome out;
  out.plan = plan;
  TerminalProgress progress(plan.progress);
  // From here on out.plan is the plan measured: prepare_file() may lower its size to what FILE holds.
  FERRY_ASSIGN_OR_RETURN(out.file_created, prepare_file(out.plan, out, progress));
  out.env = gather_environment(out.plan);
  for (auto& w : environment_warnings(out.env)) out.warnings.push_back(w);
  Residency probe = probe_residency(out.plan.path, out.plan.size);
  out.cache_check = probe.ok() ? probe->method : "none (" + probe.status().to_string() + ")";
  Runner runner(out.plan, out, progress);
  FERRY_RETURN_IF_ERROR(runner.run());
  out.total_seconds = seconds_since(start);
  compute_statistics(out);
  return out;
}

// ---- statistics, ratios, targets ----

namespace {

const Measurement* best_of(const Outcome& out, const std::string& name, const std::string& condition) {
  const Measurement* best = nullptr;
  for (const auto& m : out.results) {
    if (m.name != name || m.status != "ok" || (!condition.empty() && m.condition != condition)) continue;
    if (best == nullptr || m.gib_per_s.median > best->gib_per_s.median) best = &m;
  }
  return best;
}

const Measurement* default_run(const Outcome& out, const std::string& name, const std::string& condition) {
  for (const auto& m : out.results)
    if (m.name == name && m.condition == condition && m.default_settings && m.status == "ok") return &m;
  return nullptr;
}

std::string describe(const Measurement& m) {
  std::string s = m.name;
  if (!m.condition.empty()) s += " " + m.condition;
  if (m.threads) s += fmt::format(" {} threads", m.threads);
  if (m.task_size) s += " " + short_size(m.task_size);
  return s;
}

void add_target(Outcome& out, const std::string& name, const Measurement* value, const Measurement* reference,
                const std::string& reference_name, double want) {
  if (value == nullptr || reference == nullptr) return;
  Target t;
  t.name = name;
  t.result = describe(*value);
  t.reference = reference_name + " (" + describe(*reference) + ")";
  t.want = want;
  t.measured = ratio(value->gib_per_s.median, reference->gib_per_s.median);
  t.pass = t.measured >= want;
  out.targets.push_back(std::move(t));
}

}  // namespace

void compute_statistics(Outcome& out) {
  for (auto& m : out.results) {
    std::vector<double> rate, before, cpu;
    for (const auto& s : m.runs) {
      rate.push_back(gib_per_s(s.bytes, s.seconds));
      if (s.sync_seconds > 0) before.push_back(gib_per_s(s.bytes, s.seconds - s.sync_seconds));
      if (s.bytes) cpu.push_back(s.cpu_seconds / (static_cast<double>(s.bytes) / kGiB));
    }
    m.gib_per_s = summarize(rate);
    m.gib_per_s_before_sync = summarize(before);
    m.cpu_s_per_gib = summarize(cpu);
  }
  const bool read = out.plan.op == Op::read;
  for (auto& m : out.results) {
    if (m.status != "ok") continue;
    auto set = [&](const char* key, const Measurement* ref) {
      if (ref && ref != &m && ref->gib_per_s.median > 0) m.ratios[key] = ratio(m.gib_per_s.median, ref->gib_per_s.median);
    };
    set("copy", best_of(out, "copy", ""));
    if (!m.condition.empty()) {
      set("io", best_of(out, read ? "pread" : "pwrite", m.condition));
      set("naive", best_of(out, "naive", m.condition));
      set("cufile", best_of(out, "cufile", m.condition));
    }
  }
  const Measurement* copy = best_of(out, "copy", "");
  if (read) {
    // The targets speak of default settings: the default route (auto) where it was measured.
    auto defaults = [&](const char* condition) {
      const Measurement* m = default_run(out, "auto", condition);
      return m ? m : default_run(out, "staged", condition);
    };
    const Measurement* hot = defaults("hot");
    const Measurement* cold = defaults("cold");
    add_target(out, "hot read, default settings >= 90% of pinned H2D copy", hot, copy, "copy", 0.90);
    add_target(out, "hot read >= 10x the naive way", hot, best_of(out, "naive", "hot"), "naive", 10.0);
    add_target(out, "hot read >= 20x cuFile compat path (compat off)", hot, best_of(out, "cufile", "hot"), "cufile", 20.0);
    add_target(out, "cold read >= 95% of raw parallel O_DIRECT pread", cold, best_of(out, "pread", "cold"), "pread", 0.95);
    add_target(out, "cold read not slower than the naive way", cold, best_of(out, "naive", "cold"), "naive", 1.0);
    add_target(out, "cold read not slower than cuFile compat path", cold, best_of(out, "cufile", "cold"), "cufile", 1.0);
    // Issue 11: a fresh process's prepare() + read with the default policy within 1.25x of compat on's.
    add_target(out, "first read in a fresh process, auto within 1.25x of compat on (prepare + read)",
               best_of(out, "auto", "first-read"), best_of(out, "staged", "first-read"), "staged first read", 0.8);
  } else {
    for (const char* c : {"buffered", "direct"}) {
      add_target(out, fmt::format("{} write from GPU, default settings >= 85% of raw parallel pwrite from pinned memory", c),
                 default_run(out, "staged", c), best_of(out, "pwrite", c), "pwrite", 0.85);
    }
  }
}

}  // namespace ferry::cli::bench
