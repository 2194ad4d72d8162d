#include "platform/cuda/primary_context.hpp"

#include "base/fork_guard.hpp"
#include "base/setup_ledger.hpp"

#include <map>
#include <mutex>
#include <utility>

namespace ferry::detail {

namespace {

Status check_ordinal(const CudaApi& api, int device) {
  int count = 0;
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (device < 0 || device >= count) {
    return Status(ErrorCode::invalid_argument, "CUDA device " + std::to_string(device) + " does not exist (" +
                                                   std::to_string(count) + " device(s) present)");
  }
  return Status();
}

// An attribute the driver may not know (NUMA ids arrived in CUDA 12.2): `fallback` instead of an error.
int attribute_or(const CudaApi& api, CUdevice_attribute attribute, CUdevice device, int fallback) {
  int value = fallback;
  return api.cuDeviceGetAttribute(&value, attribute, device) == CUDA_SUCCESS ? value : fallback;
}

struct ContextRegistry {
  std::mutex mutex;
  std::map<std::pair<const CudaApi*, int>, CUcontext> contexts;
};

ContextRegistry& registry() {
  static constinit std::atomic<ContextRegistry*> instance{nullptr};  // never destroyed: contexts outlive statics
  return made_once(instance, [] { return new ContextRegistry; });
}

}  // namespace

Result<DeviceInfo> describe_device(const CudaApi& api, int device) {
  FERRY_RETURN_IF_ERROR(check_ordinal(api, device));
  CUdevice handle = 0;
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceGet(&handle, device), "cuDeviceGet"));
  DeviceInfo info;
  info.ordinal = device;
  char text[256] = {};
  FERRY_RETURN_IF_ERROR(
      cuda_check(api, api.cuDeviceGetName(text, static_cast<int>(sizeof text) - 1, handle), "cuDeviceGetName"));
  info.name = text;
  char bus_id[64] = {};
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceGetPCIBusId(bus_id, static_cast<int>(sizeof bus_id) - 1, handle),
                                   "cuDeviceGetPCIBusId"));
  info.pci_bus_id = bus_id;
  std::size_t bytes = 0;
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceTotalMem_v2(&bytes, handle), "cuDeviceTotalMem"));
  info.total_memory_bytes = bytes;
  info.pci_domain = attribute_or(api, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, handle, -1);
  info.pci_bus = attribute_or(api, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, handle, -1);
  info.pci_device = attribute_or(api, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, handle, -1);
  info.numa_id = attribute_or(api, CU_DEVICE_ATTRIBUTE_NUMA_ID, handle, -1);
  info.host_numa_id = attribute_or(api, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, handle, -1);
  info.compute_capability_major = attribute_or(api, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle, 0);
  info.compute_capability_minor = attribute_or(api, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle, 0);
  return info;
}

Result<std::vector<DeviceInfo>> list_devices(const CudaApi& api) {
  int count = 0;
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    FERRY_ASSIGN_OR_RETURN(DeviceInfo info, describe_device(api, i));
    devices.push_back(std::move(info));
  }
  return devices;
}

Result<CUcontext> primary_context(const CudaApi& api, int device) {
  ContextRegistry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto found = reg.contexts.find({&api, device});
  if (found != reg.contexts.end()) return found->second;
  FERRY_RETURN_IF_ERROR(check_ordinal(api, device));
  CUdevice handle = 0;
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDeviceGet(&handle, device), "cuDeviceGet"));
  CUcontext context = nullptr;
  SetupTimer timer(SetupStep::cuda_context);
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuDevicePrimaryCtxRetain(&context, handle),
                                   "cuDevicePrimaryCtxRetain for device " + std::to_string(device)));
  reg.contexts.emplace(std::make_pair(&api, device), context);
  return context;
}

Status make_current(const CudaApi& api, int device) {
  FERRY_ASSIGN_OR_RETURN(CUcontext context, primary_context(api, device));
  // Ask rather than cache per thread: the caller's own code may switch contexts on this thread.
  CUcontext current = nullptr;
  FERRY_RETURN_IF_ERROR(cuda_check(api, api.cuCtxGetCurrent(&current), "cuCtxGetCurrent"));
  if (current == context) return Status();
  return cuda_check(api, api.cuCtxSetCurrent(context),
                    [&] { return "cuCtxSetCurrent for device " + std::to_string(device); });
}

ScopedDeviceContext::ScopedDeviceContext(const CudaApi& api, int device) : api_(api) {
  status_ = cuda_check(api_, api_.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  if (!status_.ok()) return;
  auto context = primary_context(api_, device);
  if (!context.ok()) {
    status_ = context.status();
    return;
  }
  if (*context == previous_) return;
  status_ = cuda_check(api_, api_.cuCtxSetCurrent(*context),
                       [&] { return "cuCtxSetCurrent for device " + std::to_string(device); });
  restore_ = status_.ok();
}

ScopedDeviceContext::ScopedDeviceContext(const CudaApi& api, CUcontext context) : api_(api) {
  status_ = cuda_check(api_, api_.cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  if (!status_.ok() || context == previous_) return;
  status_ = cuda_check(api_, api_.cuCtxSetCurrent(context), "cuCtxSetCurrent");
  restore_ = status_.ok();
}

ScopedDeviceContext::~ScopedDeviceContext() {
  if (restore_) (void)api_.cuCtxSetCurrent(previous_);
}

void release_primary_contexts_for_testing(const CudaApi& api) {
  ContextRegistry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  for (auto it = reg.contexts.begin(); it != reg.contexts.end();) {
    if (it->first.first != &api) {
      ++it;
      continue;
    }
    CUdevice handle = 0;
    if (api.cuDeviceGet(&handle, it->first.second) == CUDA_SUCCESS) api.cuDevicePrimaryCtxRelease_v2(handle);
    it = reg.contexts.erase(it);
  }
}

}  // namespace ferry::detail
