// cuda_driver_status, describe_memory and synchronize_stream: the public face of classify_buffer and of a stream wait on
// the device's primary context.
#include "ferry/memory.hpp"

#include <fmt/format.h>

#include "platform/cuda/buffer_kind.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry {

Status cuda_driver_status() { return detail::process_cuda_status(); }

Result<MemoryInfo> describe_memory(const void* address) {
  const detail::CudaApi* api = detail::process_cuda_api();
  if (api == nullptr) return detail::process_cuda_status();
  FERRY_ASSIGN_OR_RETURN(detail::BufferKind kind, detail::classify_buffer(api, address));
  return MemoryInfo{detail::memory_kind_name(kind.kind), kind.device, kind.range_start, kind.range_size};
}

Status synchronize_stream(void* stream, int device) {
  const detail::CudaApi* api = detail::process_cuda_api();
  if (api == nullptr) return detail::process_cuda_status();
  detail::ScopedDeviceContext context(*api, device < 0 ? 0 : device);
  FERRY_RETURN_IF_ERROR(context.status());
  return detail::cuda_check(*api, api->cuStreamSynchronize(static_cast<detail::CUstream>(stream)), [&] {
    return fmt::format("cuStreamSynchronize(stream {}) on device {}", stream, device);
  });
}

}  // namespace ferry
