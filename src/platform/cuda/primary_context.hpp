// Devices and their primary contexts. Ferry uses each device's primary context (the one the CUDA runtime
// uses too), retained once per process and never released, so that buffers the caller allocated with
// cudaMalloc and Ferry's own streams and pinned memory live in the same context.
// Thread safety: all functions may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "platform/cuda/cuda_api.hpp"

namespace ferry::detail {

struct DeviceInfo {
  int ordinal = -1;
  std::string name;              // "NVIDIA H200"
  std::string pci_bus_id;        // "0000:1b:00.0", as cuDeviceGetPCIBusId writes it
  int pci_domain = -1, pci_bus = -1, pci_device = -1;
  std::uint64_t total_memory_bytes = 0;
  int numa_id = -1;              // NUMA node of the GPU memory; -1 when the driver cannot say
  int host_numa_id = -1;         // NUMA node of the host memory nearest the GPU; -1 when unknown
  int compute_capability_major = 0, compute_capability_minor = 0;
};

/// Every device the driver reports, in ordinal order (empty when there is none). Errors: the driver's.
[[nodiscard]] Result<std::vector<DeviceInfo>> list_devices(const CudaApi& api);
/// One device. Errors: invalid_argument for an ordinal out of range; otherwise the driver's.
[[nodiscard]] Result<DeviceInfo> describe_device(const CudaApi& api, int device);

/// The primary context of `device`, retained on the first call for this (api, device) and kept for the life of
/// the process. Errors: invalid_argument for a bad ordinal; the driver's failure to retain it.
[[nodiscard]] Result<CUcontext> primary_context(const CudaApi& api, int device);

/// Makes `device`'s primary context current on the calling thread (each worker thread calls it before its
/// first CUDA or cuFile call). Cheap when it is current already.
[[nodiscard]] Status make_current(const CudaApi& api, int device);

/// Makes `device`'s primary context (or `context`, a stream's) current for a scope on a caller's thread, and
/// restores whatever was current before (possibly nothing), so that Ferry never leaves a caller's thread on
/// another context. Ferry's own worker threads use make_current() instead.
class ScopedDeviceContext {
 public:
  ScopedDeviceContext(const CudaApi& api, int device);
  ScopedDeviceContext(const CudaApi& api, CUcontext context);
  ~ScopedDeviceContext();
  ScopedDeviceContext(const ScopedDeviceContext&) = delete;
  ScopedDeviceContext& operator=(const ScopedDeviceContext&) = delete;
  /// OK when the device's context is current now.
  const Status& status() const { return status_; }

 private:
  const CudaApi& api_;
  CUcontext previous_ = nullptr;
  bool restore_ = false;
  Status status_;
};

/// Tests only: releases the contexts retained through `api` and forgets them (a fake table's counters then
/// see balanced retain/release calls).
void release_primary_contexts_for_testing(const CudaApi& api);

}  // namespace ferry::detail
