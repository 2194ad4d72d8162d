// Loading: plan, allocate, read (merged runs, in parallel), replicate; and reads into caller memory.
#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "base/timing.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/gpu_platform.hpp"
#include "safetensors/allocation.hpp"
#include "safetensors/checkpoint_state.hpp"
#include "safetensors/layout.hpp"
#include "safetensors/read_executor.hpp"
#include "safetensors/replication.hpp"
#include "safetensors/text.hpp"

namespace ferry::safetensors {
namespace detail {
namespace {

// Pieces small enough that copies to replicas overlap the reads that follow.
constexpr std::uint64_t kReplicationPiece = 512ull << 20;

const ferry::detail::GpuPlatform& platform_of(const CheckpointState& st) {
  return st.gpu ? *st.gpu : ferry::detail::process_gpu_platform();
}

Status invalid(std::string what) { return Status(ErrorCode::invalid_argument, std::move(what)); }

// The plan must fit this checkpoint and the memory handed in: the only guard between a wrong plan and
// writes outside the caller's buffers.
Status check_plan(const CheckpointState& st, const LoadPlan& plan, std::span<void* const> bases) {
  if (plan.placements.size() != st.tensors.size()) {
    return invalid(fmt::format("the plan places {} tensors, but \"{}\" has {}", plan.placements.size(),
                               st.paths.front(), st.tensors.size()));
  }
  if (bases.size() != plan.regions.size()) {
    return invalid(fmt::format("the plan has {} regions, but {} base pointers were given", plan.regions.size(),
                               bases.size()));
  }
  for (std::size_t r = 0; r < plan.regions.size(); ++r) {
    const LoadPlan::Region& region = plan.regions[r];
    if (region.size_bytes == 0) continue;
    auto address = reinterpret_cast<std::uintptr_t>(bases[r]);
    if (address == 0) return invalid(fmt::format("region {} ({} bytes) has a null base", r, region.size_bytes));
    if (region.alignment != 0 && address % region.alignment != 0) {
      return invalid(fmt::format("region {} base {:#x} is not aligned to {} bytes", r, address, region.alignment));
    }
    if (region.copy_of >= 0) {
      auto src = static_cast<std::size_t>(region.copy_of);
      if (src >= plan.regions.size() || plan.regions[src].copy_of != -1 ||
          plan.regions[src].size_bytes != region.size_bytes) {
        return invalid(fmt::format("region {} copies region {}, which is not a primary region of the same size", r,
                                   region.copy_of));
      }
    }
  }
  for (const LoadPlan::Placement& p : plan.placements) {
    if (p.tensor >= st.tensors.size() || p.region >= plan.regions.size() || plan.regions[p.region].copy_of != -1) {
      return invalid("the plan places a tensor outside its primary regions");
    }
    const TensorInfo& t = st.tensors[p.tensor];
    const LoadPlan::Region& region = plan.regions[p.region];
    if (p.offset > region.size_bytes || t.size_bytes() > region.size_bytes - p.offset) {
      return invalid(fmt::format("the plan puts tensor {} ({} bytes) at offset {} of region {}, which holds {} bytes",
                                 quoted_text(t.name), t.size_bytes(), p.offset, p.region, region.size_bytes));
    }
  }
  return Status();
}

// Nothing is written anywhere when a file is shorter now than the header that was validated says.
Status check_files_unchanged(CheckpointState& st) {
  for (Shard& s : st.shards) {
    FERRY_ASSIGN_OR_RETURN(std::uint64_t now, s.data.size());
    if (now < s.file_bytes) {
      return Status(ErrorCode::io_error,
                    fmt::format("\"{}\" is {} bytes now, shorter than the {} bytes it had when its header was read: it "
                                "was truncated; nothing was loaded",
                                s.path, now, s.file_bytes),
                    0, s.path);
    }
  }
  return Status();
}

// One op per run of tensors that follow one another in a file and go to one region, in file order: read
// with one request, each tensor's bytes scattered to its aligned place.
std::vector<ReadOp> ops_from_plan(const CheckpointState& st, const LoadPlan& plan, std::span<void* const> bases) {
  std::vector<std::size_t> order(plan.placements.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const TensorInfo& ta = st.tensors[plan.placements[a].tensor];
    const TensorInfo& tb = st.tensors[plan.placements[b].tensor];
    if (ta.shard != tb.shard) return ta.shard < tb.shard;
    return ta.file_offset < tb.file_offset;
  });
  std::vector<ReadOp> ops;
  for (std::size_t i : order) {
    const LoadPlan::Placement& p = plan.placements[i];
    const TensorInfo& t = st.tensors[p.tensor];
    if (t.size_bytes() == 0) continue;
    const auto address = reinterpret_cast<std::uintptr_t>(bases[p.region]) + p.offset;
    if (!ops.empty()) {
      ReadOp& last = ops.back();
      // Empty tensors between two others of the run hold no bytes: the run goes on past them.
      if (last.region == p.region && last.shard == t.shard && last.file_offset + last.size == t.file_offset &&
          last.first_tensor + last.tensor_count <= p.tensor && p.offset >= last.region_offset) {
        last.places.push_back(ferry::detail::Segment{last.size, t.size_bytes(), address});
        last.size += t.size_bytes();
        last.tensor_count = p.tensor - last.first_tensor + 1;
        continue;
      }
    }
    ReadOp op;
    op.shard = t.shard;
    op.file_offset = t.file_offset;
    op.size = t.size_bytes();
    op.places.push_back(ferry::detail::Segment{0, op.size, address});
    op.first_tensor = p.tensor;
    op.region = p.region;
    op.region_offset = p.offset;
    ops.push_back(op);
  }
  return ops;
}

unsigned in_flight_limit(const CheckpointState& st, const LoadOptions& options) {
  unsigned limit = options.max_requests_in_flight;
  if (st.max_requests_by_staging > 0) {
    limit = limit == 0 ? st.max_requests_by_staging : std::min(limit, st.max_requests_by_staging);
  }
  return limit;
}

ExecOptions exec_options(const CheckpointState& st, const LoadOptions& options) {
  ExecOptions e;
  e.max_in_flight = in_flight_limit(st, options);
  e.progress = options.progress;
  e.progress_interval = options.progress_interval;
  return e;
}

// The settings notes concern device reads (compat mode, staging): only loads that made some say them.
void add_settings_notes(const CheckpointState& st, LoadStats& stats) {
  if (stats.report.total_ops() == stats.report.at(Route::host).ops) return;
  stats.notes.insert(stats.notes.begin(), st.settings_notes.begin(), st.settings_notes.end());
}

ferry::detail::CUdeviceptr device_pointer(void* p) {
  return static_cast<ferry::detail::CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
}

// One Replicator per primary region that has copies.
Result<std::map<std::size_t, std::unique_ptr<Replicator>>> start_replicas(const CheckpointState& st,
                                                                          const LoadPlan& plan,
                                                                          std::span<void* const> bases,
                                                                          std::vector<std::string>& notes) {
  std::map<std::size_t, std::unique_ptr<Replicator>> out;
  std::map<std::size_t, std::vector<Replicator::Target>> targets;
  for (std::size_t r = 0; r < plan.regions.size(); ++r) {
    const LoadPlan::Region& region = plan.regions[r];
    if (region.copy_of < 0) continue;
    const LoadPlan::Region& source = plan.regions[static_cast<std::size_t>(region.copy_of)];
    if (region.device < 0 || source.device < 0) {
      return invalid(fmt::format("region {} copies region {}: replicas are GPU to GPU copies", r, region.copy_of));
    }
    targets[static_cast<std::size_t>(region.copy_of)].push_back({region.device, device_pointer(bases[r])});
  }
  if (targets.empty()) return out;
  Status why;
  const ferry::detail::CudaApi* api = platform_of(st).cuda(&why);
  if (api == nullptr) {
    return Status(ErrorCode::unavailable, "Replicas need CUDA, which is not usable here: " + why.message());
  }
  for (auto& [source, list] : targets) {
    FERRY_ASSIGN_OR_RETURN(auto replicator, Replicator::start(*api, plan.regions[source].device,
                                                              device_pointer(bases[source]), std::move(list), &notes));
    out.emplace(source, std::move(replicator));
  }
  return out;
}

std::vector<LoadedTensor> tensors_in(const CheckpointState& st, const LoadPlan& plan,
                                     const std::vector<std::shared_ptr<Allocation>>& allocations,
                                     const std::vector<std::size_t>& region_for_primary) {
  std::vector<LoadedTensor> out;
  out.reserve(plan.placements.size());
  for (const LoadPlan::Placement& p : plan.placements) {
    const TensorInfo& t = st.tensors[p.tensor];
    const auto& block = allocations[region_for_primary[p.region]];
    LoadedTensor lt;
    lt.name = t.name;
    lt.dtype = t.dtype;
    lt.shape = t.shape;
    lt.device = block->device();
    lt.data = static_cast<char*>(block->data()) + p.offset;
    lt.size_bytes = t.size_bytes();
    lt.storage = block;
    out.push_back(std::move(lt));
  }
  return out;
}

}  // namespace

Result<LoadedCheckpoint> load_checkpoint(const std::string& path, const LoadOptions& options,
                                         const OpenOptions& open_options, const Seams& seams) {
  auto start = ferry::detail::now_ns();
  FERRY_ASSIGN_OR_RETURN(Checkpoint checkpoint, open_checkpoint(path, open_options, seams));
  double open_seconds = ferry::detail::seconds_since(start);
  FERRY_ASSIGN_OR_RETURN(LoadedCheckpoint loaded, checkpoint.load(options));
  loaded.open_seconds = open_seconds;
  return loaded;
}

}  // namespace detail

Result<LoadPlan> Checkpoint::plan(const LoadOptions& options) const {
  return detail::make_plan(state_->tensors, options);
}

Result<LoadStats> Checkpoint::load_into(const LoadPlan& plan, std::span<void* const> bases,
                                        const LoadOptions& options) const {
  detail::CheckpointState& st = *state_;
  auto start = ferry::detail::now_ns();
  FERRY_RETURN_IF_ERROR(detail::check_plan(st, plan, bases));
  FERRY_RETURN_IF_ERROR(detail::check_files_unchanged(st));
  LoadStats stats;
  FERRY_ASSIGN_OR_RETURN(auto replicators, detail::start_replicas(st, plan, bases, stats.notes));
  std::uint64_t piece = options.max_request_bytes;
  if (piece == 0 && !replicators.empty()) piece = detail::kReplicationPiece;
  std::vector<detail::ReadOp> ops = detail::split_ops(detail::ops_from_plan(st, plan, bases), piece);

  detail::ExecOptions exec = detail::exec_options(st, options);
  exec.on_done = [&replicators](const detail::ReadOp& op) {
    auto it = replicators.find(op.region);
    return it == replicators.end() ? Status() : it->second->copy(op.region_offset, op.region_span());
  };
  Status status = detail::execute_reads(st, ops, exec, stats);
  auto waiting = ferry::detail::now_ns();
  for (auto& [region, replicator] : replicators) {
    Status s = replicator->finish();
    stats.bytes_copied += replicator->bytes_copied();
    if (status.ok() && !s.ok()) status = s;
  }
  stats.replicate_wait_seconds = replicators.empty() ? 0.0 : ferry::detail::seconds_since(waiting);
  stats.seconds = ferry::detail::seconds_since(start);
  detail::add_settings_notes(st, stats);
  FERRY_RETURN_IF_ERROR(status);
  return stats;
}

Result<LoadStats> Checkpoint::read_into(std::span<const Destination> destinations, const LoadOptions& options) const {
  detail::CheckpointState& st = *state_;
  auto start = ferry::detail::now_ns();
  std::vector<detail::ReadOp> ops;
  for (const Destination& d : destinations) {
    auto it = st.index.find(d.name);
    if (it == st.index.end()) {
      return Status(ErrorCode::not_found,
                    fmt::format("\"{}\" has no tensor {}", st.paths.front(), detail::quoted_text(d.name)), ENOENT,
                    st.paths.front());
    }
    const TensorInfo& t = st.tensors[it->second];
    std::uint64_t size = d.size_bytes == UINT64_MAX && d.offset <= t.size_bytes() ? t.size_bytes() - d.offset
                                                                                   : d.size_bytes;
    if (d.offset > t.size_bytes() || size > t.size_bytes() - d.offset) {
      return Status(ErrorCode::out_of_range,
                    fmt::format("bytes [{}, {}) are not all inside tensor {} of \"{}\", which has {} bytes", d.offset,
                                d.offset + size, detail::quoted_text(d.name), st.shards[t.shard].path, t.size_bytes()),
                    0, st.shards[t.shard].path);
    }
    if (size == 0) continue;
    if (d.data == nullptr) {
      return Status(ErrorCode::invalid_argument,
                    fmt::format("null destination for tensor {}", detail::quoted_text(d.name)));
    }
    detail::ReadOp op;
    op.shard = t.shard;
    op.file_offset = t.file_offset + d.offset;
    op.size = size;
    op.places.push_back(ferry::detail::Segment{0, size, reinterpret_cast<std::uintptr_t>(d.data)});
    op.first_tensor = it->second;
    ops.push_back(op);
  }
  FERRY_RETURN_IF_ERROR(detail::check_files_unchanged(st));
  LoadStats stats;
  Status status = detail::execute_reads(st, detail::split_ops(std::move(ops), options.max_request_bytes),
                                        detail::exec_options(st, options), stats);
  stats.seconds = ferry::detail::seconds_since(start);
  detail::add_settings_notes(st, stats);
  FERRY_RETURN_IF_ERROR(status);
  return stats;
}

Result<LoadedCheckpoint> Checkpoint::load(const LoadOptions& options) const {
  const detail::CheckpointState& st = *state_;
  FERRY_ASSIGN_OR_RETURN(LoadPlan plan, this->plan(options));
  LoadedCheckpoint out;
  out.metadata = st.metadata;
  auto start = ferry::detail::now_ns();
  std::vector<void*> bases;
  for (const LoadPlan::Region& region : plan.regions) {
    FERRY_ASSIGN_OR_RETURN(auto block, detail::AllocationAccess::allocate(detail::platform_of(st), region.device,
                                                                          region.size_bytes));
    bases.push_back(block->data());
    out.allocations.push_back(std::move(block));
  }
  out.allocate_seconds = ferry::detail::seconds_since(start);
  FERRY_ASSIGN_OR_RETURN(out.stats, load_into(plan, bases, options));

  std::vector<std::size_t> identity(plan.regions.size());
  std::iota(identity.begin(), identity.end(), std::size_t{0});
  out.tensors = detail::tensors_in(st, plan, out.allocations, identity);
  for (int device : options.replicas) {
    std::vector<std::size_t> copy_for(plan.regions.size());
    for (std::size_t r = 0; r < plan.regions.size(); ++r) {
      if (plan.regions[r].copy_of >= 0 && plan.regions[r].device == device) {
        copy_for[static_cast<std::size_t>(plan.regions[r].copy_of)] = r;
      }
    }
    out.replicas.push_back(detail::tensors_in(st, plan, out.allocations, copy_for));
  }
  return out;
}

const LoadedTensor* LoadedCheckpoint::find(std::string_view name) const {
  for (const LoadedTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Result<LoadedCheckpoint> load(const std::string& path, const LoadOptions& options, const OpenOptions& open_options) {
  return detail::load_checkpoint(path, options, open_options, detail::Seams{});
}

}  // namespace ferry::safetensors
