// make_plan: regions and offsets.
//
// Within a region, a run of tensors that follow each other in one file keeps the file's spacing, so that
// it is read with one pread. The padding before a run is bounded by the run itself, so that a region holds
// about the data placed in it (never twice as much), whatever the file's alignments:
// - a run of at least kPageCongruentRun bytes starts at an offset congruent to its file offset modulo
//   4096, so that in host memory the pread's aligned body can use O_DIRECT (the region base is
//   4096-aligned there) and cuFile can read it direct: under 4096 bytes of padding, at most 1/16 of the run;
// - a shorter run starts congruent to its file offset modulo its largest element size (8 at most), which
//   keeps each of its tensors aligned for its dtype: fewer padding bytes than the run holds;
// - a tensor whose file offset is not a multiple of its element size (a writer that does not align)
//   starts a run at the next multiple of it: fewer padding bytes than the tensor holds.
#include "safetensors/layout.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace ferry::safetensors::detail {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kRunAlignment = 256;  // device regions' base alignment
constexpr std::uint64_t kPageCongruentRun = 64 << 10;

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

bool key_matches(const std::string& key, const std::string& name) {
  if (key.empty()) return true;
  if (name.size() < key.size() || name.compare(0, key.size(), key) != 0) return false;
  return name.size() == key.size() || name[key.size()] == '.';
}

Status check_options(const LoadOptions& o) {
  auto bad = [](std::string what) { return Status(ErrorCode::invalid_argument, std::move(what)); };
  if (o.device < kHostMemory) return bad(fmt::format("device {} is neither a GPU nor host memory (-1)", o.device));
  for (const auto& [key, device] : o.device_map) {
    if (device < kHostMemory) {
      return bad(fmt::format("the device map sends \"{}\" to device {}, neither a GPU nor host memory (-1)", key, device));
    }
  }
  if (o.replicas.empty()) return Status();
  if (o.device < 0) return bad("replicas need a GPU as the device to read into, not host memory");
  if (!o.device_map.empty()) return bad("replicas copy the whole checkpoint: they cannot be combined with a device map");
  std::set<int> seen{o.device};
  for (int r : o.replicas) {
    if (r < 0) return bad(fmt::format("replica device {} is not a GPU", r));
    if (!seen.insert(r).second) {
      return bad(fmt::format("GPU {} appears twice among the device and its replicas", r));
    }
  }
  return Status();
}

struct RegionCursor {
  std::size_t region = 0;
  std::uint64_t end = 0;          // bytes used so far
  bool in_run = false;
  std::size_t run_shard = 0;
  std::uint64_t run_file_end = 0; // file offset just past the run's last tensor
};

// What a run starting with tensors[members[k]] would hold: the tensors of its region that follow it in the
// same file without a gap, each aligned there for its dtype (zero-byte tensors take no part). The bytes are
// counted only as far as kPageCongruentRun, so that every tensor is looked at about once.
struct RunExtent {
  std::uint64_t bytes = 0;
  std::uint64_t max_element = 1;
};
RunExtent run_extent(const std::vector<TensorInfo>& tensors, const std::vector<std::size_t>& members, std::size_t k) {
  const TensorInfo& first = tensors[members[k]];
  RunExtent run{first.size_bytes(), dtype_size(first.dtype)};
  std::uint64_t file_end = first.file_offset + first.size_bytes();
  for (std::size_t j = k + 1; j < members.size() && run.bytes < kPageCongruentRun; ++j) {
    const TensorInfo& t = tensors[members[j]];
    if (t.size_bytes() == 0) continue;
    if (t.shard != first.shard || t.file_offset != file_end || t.file_offset % dtype_size(t.dtype) != 0) break;
    run.bytes += t.size_bytes();
    run.max_element = std::max(run.max_element, dtype_size(t.dtype));
    file_end += t.size_bytes();
  }
  return run;
}

// Where tensors[members[k]] goes in the region `c` describes.
std::uint64_t place(const std::vector<TensorInfo>& tensors, const std::vector<std::size_t>& members, std::size_t k,
                    RegionCursor& c) {
  const TensorInfo& t = tensors[members[k]];
  const std::uint64_t align = dtype_size(t.dtype);
  if (t.size_bytes() == 0) return align_up(c.end, align);  // takes no bytes: neither starts nor breaks a run
  std::uint64_t offset = 0;
  if (c.in_run && c.run_shard == t.shard && c.run_file_end == t.file_offset && c.end % align == 0) {
    offset = c.end;
  } else if (t.file_offset % align == 0) {
    const RunExtent run = run_extent(tensors, members, k);
    const std::uint64_t modulus = run.bytes >= kPageCongruentRun ? kPage : run.max_element;  // powers of two
    offset = c.end + (t.file_offset - c.end) % modulus;  // the file offset's remainder modulo `modulus`
  } else {
    offset = align_up(c.end, align);
  }
  c.in_run = true;
  c.run_shard = t.shard;
  c.run_file_end = t.file_offset + t.size_bytes();
  c.end = offset + t.size_bytes();
  return offset;
}

}  // namespace

int device_for(const std::string& name, const LoadOptions& options) {
  int device = options.device;
  std::size_t best = 0;
  bool matched = false;
  for (const auto& [key, d] : options.device_map) {
    if (!key_matches(key, name)) continue;
    if (!matched || key.size() > best) {
      best = key.size();
      device = d;
      matched = true;
    }
  }
  return device;
}

Result<LoadPlan> make_plan(const std::vector<TensorInfo>& tensors, const LoadOptions& options) {
  FERRY_RETURN_IF_ERROR(check_options(options));
  LoadPlan plan;
  std::vector<int> devices(tensors.size());
  std::set<int> used;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    devices[i] = device_for(tensors[i].name, options);
    used.insert(devices[i]);
  }
  // Regions in device order (host memory first), so that plans are the same from run to run.
  std::map<int, RegionCursor> cursors;
  std::map<int, std::vector<std::size_t>> members;  // per device: its tensors, in checkpoint order
  for (int d : used) {
    cursors[d].region = plan.regions.size();
    plan.regions.push_back(LoadPlan::Region{d, 0, d == kHostMemory ? kPage : kRunAlignment, -1});
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) members[devices[i]].push_back(i);
  plan.placements.resize(tensors.size());
  for (auto& [device, list] : members) {
    RegionCursor& c = cursors[device];
    LoadPlan::Region& region = plan.regions[c.region];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const std::size_t i = list[k];
      const std::uint64_t offset = place(tensors, list, k, c);
      plan.read_bytes += tensors[i].size_bytes();
      plan.placements[i] = LoadPlan::Placement{i, c.region, offset};
      region.size_bytes = std::max(region.size_bytes, std::max(c.end, offset));
    }
  }
  const std::size_t primaries = plan.regions.size();
  for (int r : options.replicas) {
    for (std::size_t p = 0; p < primaries; ++p) {
      LoadPlan::Region copy = plan.regions[p];
      copy.device = r;
      copy.copy_of = static_cast<int>(p);
      plan.regions.push_back(copy);
    }
  }
  return plan;
}

}  // namespace ferry::safetensors::detail
