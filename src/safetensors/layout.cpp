// make_plan: regions and offsets.
//
// Within a region, tensors follow one another in checkpoint order, each at the next multiple of the
// region's tensor alignment (256 bytes on a GPU, 64 in host memory): the padding is less than one alignment
// per tensor, and the region's base is aligned too (4096 in host memory). Tensors that follow one another in
// a file are still read together: one request per run of them, scattered from the bounce buffers into their
// places (loader.cpp, FileState::submit_scattered).
#include "safetensors/layout.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace ferry::safetensors::detail {
namespace {

constexpr std::uint64_t kPage = 4096;

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

std::uint64_t tensor_alignment(int device) { return device == kHostMemory ? kHostTensorAlignment : kDeviceTensorAlignment; }

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
  std::map<int, std::size_t> region_of;
  for (int d : used) {
    region_of[d] = plan.regions.size();
    plan.regions.push_back(LoadPlan::Region{d, 0, d == kHostMemory ? kPage : kDeviceTensorAlignment, -1});
  }
  plan.placements.resize(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::size_t r = region_of[devices[i]];
    LoadPlan::Region& region = plan.regions[r];
    const std::uint64_t offset = align_up(region.size_bytes, tensor_alignment(region.device));
    plan.placements[i] = LoadPlan::Placement{i, r, offset};
    region.size_bytes = offset + tensors[i].size_bytes();
    plan.read_bytes += tensors[i].size_bytes();
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
