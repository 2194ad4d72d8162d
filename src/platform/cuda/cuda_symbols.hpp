// The one list of CUDA driver entry points Ferry calls. Everything else is generated from it: the function
// pointer types (cuda_abi.hpp), the members of CudaApi (cuda_api.hpp), their loading and completeness check
// (cuda_api.cpp), the fake driver's table (tests/support/fake_cuda.cpp) and the ABI test against cuda.h.
//
// FERRY_CUDA_DRIVER_SYMBOLS(X) calls X(need, symbol, result, (parameters)) once per entry point:
// - need: a SymbolNeed (platform/dynamic_library.hpp). `required`: CudaApi::load fails without it;
//   `optional`: left null when the driver lacks it, and the code using it asks first.
// - symbol: the exported name, which is the one cuda.h's macros select (cuda.h maps cuMemAlloc to
//   cuMemAlloc_v2), and the name of the type (`cuMemAlloc_v2_fn`) and of the member.
// The order is the order of loading, so a library missing several symbols is reported by the first.
// Comments inside the list are /* */ ones: a // comment would swallow the line continuation.
#pragma once

// clang-format off
#define FERRY_CUDA_DRIVER_SYMBOLS(X)                                                                          \
  X(required, cuInit, CUresult, (unsigned int flags))                                                         \
  X(required, cuDriverGetVersion, CUresult, (int* version))                                                   \
  X(required, cuDeviceGetCount, CUresult, (int* count))                                                       \
  X(required, cuDeviceGet, CUresult, (CUdevice* device, int ordinal))                                         \
  X(required, cuDeviceGetName, CUresult, (char* name, int length, CUdevice device))                           \
  X(required, cuDeviceGetAttribute, CUresult, (int* value, CUdevice_attribute attribute, CUdevice device))    \
  X(required, cuDeviceGetPCIBusId, CUresult, (char* bus_id, int length, CUdevice device))                     \
  X(required, cuDeviceTotalMem_v2, CUresult, (std::size_t* bytes, CUdevice device))                           \
  X(required, cuDevicePrimaryCtxRetain, CUresult, (CUcontext* context, CUdevice device))                      \
  X(required, cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice device))                                      \
  X(required, cuCtxSetCurrent, CUresult, (CUcontext context))                                                 \
  X(required, cuCtxGetCurrent, CUresult, (CUcontext* context))                                                \
  X(required, cuCtxSynchronize, CUresult, ())                                                                 \
  X(required, cuPointerGetAttribute, CUresult, (void* data, CUpointer_attribute attribute, CUdeviceptr pointer)) \
  X(required, cuPointerGetAttributes, CUresult,                                                               \
    (unsigned int count, CUpointer_attribute* attributes, void** data, CUdeviceptr pointer))                  \
  X(required, cuMemAlloc_v2, CUresult, (CUdeviceptr* pointer, std::size_t bytes))                             \
  X(required, cuMemFree_v2, CUresult, (CUdeviceptr pointer))                                                  \
  X(required, cuMemHostAlloc, CUresult, (void** pointer, std::size_t bytes, unsigned int flags))              \
  X(required, cuMemFreeHost, CUresult, (void* pointer))                                                       \
  X(required, cuMemHostRegister_v2, CUresult, (void* pointer, std::size_t bytes, unsigned int flags))         \
  X(required, cuMemHostUnregister, CUresult, (void* pointer))                                                 \
  X(required, cuMemcpyHtoD_v2, CUresult, (CUdeviceptr dst, const void* src, std::size_t bytes))               \
  X(required, cuMemcpyDtoH_v2, CUresult, (void* dst, CUdeviceptr src, std::size_t bytes))                     \
  X(required, cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream)) \
  X(required, cuMemcpyDtoHAsync_v2, CUresult, (void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream)) \
  X(required, cuMemsetD8_v2, CUresult, (CUdeviceptr dst, unsigned char value, std::size_t count))             \
  X(required, cuStreamCreate, CUresult, (CUstream* stream, unsigned int flags))                               \
  X(required, cuStreamDestroy_v2, CUresult, (CUstream stream))                                                \
  X(required, cuStreamSynchronize, CUresult, (CUstream stream))                                               \
  X(required, cuStreamQuery, CUresult, (CUstream stream))                                                     \
  X(required, cuEventCreate, CUresult, (CUevent* event, unsigned int flags))                                  \
  X(required, cuEventRecord, CUresult, (CUevent event, CUstream stream))                                      \
  X(required, cuEventSynchronize, CUresult, (CUevent event))                                                  \
  X(required, cuEventQuery, CUresult, (CUevent event))                                                        \
  X(required, cuEventDestroy_v2, CUresult, (CUevent event))                                                   \
  X(required, cuGetErrorName, CUresult, (CUresult error, const char** name))                                  \
  X(required, cuGetErrorString, CUresult, (CUresult error, const char** text))                                \
  /* GPU to GPU (safetensors replicas): peer copies and peer access. */                                       \
  X(required, cuMemcpyPeerAsync, CUresult,                                                                    \
    (CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src, CUcontext src_context, std::size_t bytes,       \
     CUstream stream))                                                                                        \
  X(required, cuDeviceCanAccessPeer, CUresult, (int* can_access, CUdevice device, CUdevice peer))             \
  X(required, cuCtxEnablePeerAccess, CUresult, (CUcontext peer_context, unsigned int flags))                  \
  /* Stream-ordered requests (File::read_async; docs/stream-order.md): a driver without cuStreamGetCtx */    \
  /* refuses them, one without the stream memory operations has them synchronise the stream instead. */       \
  /* cuMemsetD8Async serves tests and tools. */                                                               \
  X(optional, cuStreamWaitValue32_v2, CUresult,                                                               \
    (CUstream stream, CUdeviceptr address, unsigned int value, unsigned int flags))                           \
  X(optional, cuStreamWriteValue32_v2, CUresult,                                                              \
    (CUstream stream, CUdeviceptr address, unsigned int value, unsigned int flags))                           \
  X(optional, cuStreamGetCtx, CUresult, (CUstream stream, CUcontext* context))                                \
  X(optional, cuStreamIsCapturing, CUresult, (CUstream stream, CUstreamCaptureStatus* status))                \
  X(optional, cuMemHostGetDevicePointer_v2, CUresult,                                                         \
    (CUdeviceptr* device_pointer, void* host_pointer, unsigned int flags))                                    \
  X(optional, cuMemsetD8Async, CUresult, (CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream)) \
  /* Many copies in one call (drivers of CUDA 13 and later export this form): a batch's pieces whose */      \
  /* destinations do not follow one another (staged_backend.cpp); without it, one copy each. */               \
  X(optional, cuMemcpyBatchAsync_v2, CUresult,                                                                \
    (CUdeviceptr* dsts, CUdeviceptr* srcs, std::size_t* sizes, std::size_t count, CUmemcpyAttributes* attrs,  \
     std::size_t* attrs_indices, std::size_t attrs_count, CUstream stream))
// clang-format on
