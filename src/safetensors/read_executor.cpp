// execute_reads: the requests of a load, in flight together while threads would otherwise idle.
#include "safetensors/read_executor.hpp"

#include <algorithm>
#include <deque>

#include <fmt/format.h>

#include "file/file_state.hpp"
#include "safetensors/text.hpp"

namespace ferry::safetensors::detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kPage = 4096;

Status failed_op(const CheckpointState& state, const ReadOp& op, const Status& cause) {
  return Status(cause.code(), fmt::format("Could not load {}: {}", describe_op(state, op), cause.message()),
                cause.sys_errno(), state.shards[op.shard].path);
}

// The threads a read of `file` may use: its requests' jobs.
unsigned threads_of(const File& file) { return std::max(1u, file.config().threads()); }

// The pool's workers a request of `bytes` keeps busy: one per task, up to the file's threads.
unsigned workers_kept_busy(const File& file, std::uint64_t bytes) {
  const std::uint64_t task = file.config().task_size();
  return static_cast<unsigned>(std::clamp<std::uint64_t>((bytes + task - 1) / task, 1, threads_of(file)));
}

}  // namespace

std::string describe_op(const CheckpointState& state, const ReadOp& op) {
  const std::string& path = state.shards[op.shard].path;
  const TensorInfo& first = state.tensors[op.first_tensor];
  if (op.tensor_count <= 1) return fmt::format("tensor {} of \"{}\"", quoted_text(first.name), path);
  const TensorInfo& last = state.tensors[op.first_tensor + op.tensor_count - 1];
  return fmt::format("tensors {} to {} ({} tensors) of \"{}\"", quoted_text(first.name), quoted_text(last.name), op.tensor_count,
                     path);
}

std::vector<ReadOp> split_ops(std::vector<ReadOp> ops, std::uint64_t max_bytes) {
  if (max_bytes == 0) return ops;
  const std::uint64_t step = std::max(kPage, max_bytes / kPage * kPage);
  std::vector<ReadOp> out;
  for (const ReadOp& op : ops) {
    const ferry::detail::Destination places = ferry::detail::Destination::scattered(op.places);
    const std::uintptr_t first_address = places.address(0);
    std::uint64_t done = 0;
    while (done < op.size) {
      std::uint64_t at = op.file_offset + done;
      std::uint64_t end = (at + step) / kPage * kPage;  // the next page boundary a step away
      if (end <= at) end = at + step;
      std::uint64_t n = std::min(op.size - done, end - at);
      ReadOp piece = op;
      piece.file_offset = at;
      piece.size = n;
      piece.places.clear();
      places.for_each_part(done, n, [&](std::uintptr_t address, std::uint64_t bytes, std::uint64_t offset) {
        piece.places.push_back(ferry::detail::Segment{offset - done, bytes, address});
      });
      // Addresses of one op are in one region: their distances are region offsets.
      piece.region_offset = op.region_offset + (piece.places.front().address - first_address);
      out.push_back(std::move(piece));
      done += n;
    }
  }
  return out;
}

Status execute_reads(CheckpointState& state, const std::vector<ReadOp>& ops, const ExecOptions& options,
                     LoadStats& stats) {
  std::uint64_t total = 0;
  for (const ReadOp& op : ops) total += op.size;
  struct InFlight {
    std::size_t op;
    Future future;
    unsigned workers;  // workers_kept_busy
  };
  std::deque<InFlight> in_flight;
  std::uint64_t completed = 0;
  Status first;
  bool cancelled = false;
  auto last_progress = Clock::now();

  auto tell = [&](bool force) {
    if (!options.progress || cancelled) return;
    auto now = Clock::now();
    if (!force && now - last_progress < options.progress_interval) return;
    last_progress = now;
    std::uint64_t done = completed;
    for (const InFlight& f : in_flight) done += f.future.bytes_done();
    if (!options.progress(std::min(done, total), total)) {
      // Stop what is in flight at its next task too: a shard is one request, and waiting for it whole kept
      // a Ctrl-C waiting for seconds (the newcomer review: 2.5-5.1 s on 2 GiB).
      cancelled = true;
      for (InFlight& f : in_flight) f.future.cancel();
    }
  };

  tell(true);
  std::size_t next = 0;
  // A request starts only while those in flight leave a worker idle: one that keeps every worker busy (a
  // shard's data) runs alone. A second such request adds no reader, only staging kits to pin (the two
  // requests' jobs take turns, each keeping its kit): on the H200 machine the two shards of a 3.4 GB
  // checkpoint in flight together took 123 ms in a fresh process and 79 ms in a warm one, one after the
  // other 82 and 72 ms (bench/results/2026-12-02-h200-model-load).
  unsigned busy = 0;
  for (;;) {
    while (first.ok() && !cancelled && next < ops.size() &&
           (options.max_in_flight == 0 || in_flight.size() < options.max_in_flight)) {
      const ReadOp& op = ops[next];
      File& file = state.shards[op.shard].data;
      if (busy >= threads_of(file)) break;
      const unsigned workers = workers_kept_busy(file, op.size);
      Future read = op.places.size() == 1
                        ? file.pread(reinterpret_cast<void*>(op.places[0].address), op.size, op.file_offset)
                        : ferry::detail::FileState::of(file).submit_scattered(op.places, op.file_offset);
      in_flight.push_back({next, std::move(read), workers});
      busy += workers;
      ++stats.requests;
      ++next;
    }
    if (in_flight.empty()) break;
    InFlight& oldest = in_flight.front();
    if (options.progress) {
      if (!oldest.future.wait_for(options.progress_interval)) {
        tell(false);
        continue;
      }
    }
    const ReadOp& op = ops[oldest.op];
    Result<Transfer> r = oldest.future.get();
    busy -= oldest.workers;
    in_flight.pop_front();
    if (!r.ok()) {
      // (A request cancelled along with the load is not an error of its own: the load reports the cancel.)
      if (first.ok() && !(cancelled && r.status().code() == ErrorCode::cancelled)) {
        first = failed_op(state, op, r.status());
      }
      continue;
    }
    stats.report.merge(r->report);
    stats.bytes_read += r->bytes;
    completed += r->bytes;
    if (r->bytes != op.size) {
      if (first.ok()) {
        first = Status(ErrorCode::io_error,
                       fmt::format("Could not load {}: the file ended at byte {}, inside bytes [{}, {}) that were being "
                                   "read (was it truncated while loading?)",
                                   describe_op(state, op), op.file_offset + r->bytes, op.file_offset,
                                   op.file_offset + op.size),
                       0, state.shards[op.shard].path);
      }
      continue;
    }
    if (first.ok() && options.on_done) {
      Status s = options.on_done(op);
      if (!s.ok()) first = s;
    }
    tell(false);
  }
  if (first.ok() && cancelled) {
    return Status(ErrorCode::cancelled,
                  fmt::format("Loading \"{}\" was cancelled after {} of {} bytes", state.paths.front(), completed, total));
  }
  if (first.ok() && options.progress) (void)options.progress(total, total);
  return first;
}

}  // namespace ferry::safetensors::detail
