// Ferry's own declarations of the small part of the CUDA driver API it calls, so that the library builds
// without cuda.h. Values and layouts are those of cuda.h (CUDA 13.0); tests/unit/cuda_abi_test.cpp checks
// them against the real header wherever it is installed.
//
// Names follow cuda.h inside ferry::detail, except cuda.h's #define'd flags (CU_MEMHOSTALLOC_*, ...),
// which get kConstant names here so that a file including both headers still compiles.
// Function pointer types are named after the exported symbol they are loaded from (`cuMemAlloc_v2_fn`):
// cuda.h maps cuMemAlloc to cuMemAlloc_v2 by macro, and Ferry loads the symbol the macro would pick.
#pragma once

#include <cstddef>

#include "platform/cuda/cuda_symbols.hpp"

namespace ferry::detail {

// CUresult: the driver's status. Declared with a fixed underlying type so that any value the driver
// returns, listed here or not, is a valid CUresult.
enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
  CUDA_ERROR_SYSTEM_NOT_READY = 802,
  CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
  CUDA_ERROR_UNKNOWN = 999,
};

using CUdevice = int;
using CUdeviceptr = unsigned long long;  // 64-bit builds only, as cuda.h's CUdeviceptr_v2
struct CUctx_st;
using CUcontext = CUctx_st*;
struct CUstream_st;
using CUstream = CUstream_st*;
struct CUevent_st;
using CUevent = CUevent_st*;

enum CUpointer_attribute : int {
  CU_POINTER_ATTRIBUTE_CONTEXT = 1,         // CUcontext
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,     // unsigned int (CUmemorytype); 0 for memory CUDA does not know
  CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,  // CUdeviceptr
  CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,    // void*
  CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,      // a boolean, written as unsigned int
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,  // int
  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
  CU_POINTER_ATTRIBUTE_MAPPED = 13,
};

enum CUmemorytype : unsigned int {
  CU_MEMORYTYPE_HOST = 1,
  CU_MEMORYTYPE_DEVICE = 2,
  CU_MEMORYTYPE_ARRAY = 3,
  CU_MEMORYTYPE_UNIFIED = 4,
};

enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88,
  CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 99,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
  CU_DEVICE_ATTRIBUTE_NUMA_ID = 131,       // NUMA node of the GPU's memory; drivers before 12.2 reject it
  CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID = 134,  // NUMA node of the host closest to the GPU, -1 without NUMA
};

// cuMemHostAlloc flags (macros in cuda.h).
inline constexpr unsigned int kMemHostAllocPortable = 0x01;
inline constexpr unsigned int kMemHostAllocDeviceMap = 0x02;
inline constexpr unsigned int kMemHostAllocWriteCombined = 0x04;
// cuMemHostRegister flags (macros in cuda.h).
inline constexpr unsigned int kMemHostRegisterPortable = 0x01;
inline constexpr unsigned int kMemHostRegisterDeviceMap = 0x02;
inline constexpr unsigned int kMemHostRegisterReadOnly = 0x08;

enum CUstream_flags : unsigned int {
  CU_STREAM_DEFAULT = 0x0,
  CU_STREAM_NON_BLOCKING = 0x1,  // no implicit synchronisation with the legacy default stream
};

// cuStreamWaitValue32 flags: GEQ waits until (int32_t)(*addr - value) >= 0, so a counter may wrap.
enum CUstreamWaitValue_flags : unsigned int {
  CU_STREAM_WAIT_VALUE_GEQ = 0x0,
  CU_STREAM_WAIT_VALUE_EQ = 0x1,
};

enum CUstreamWriteValue_flags : unsigned int {
  CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,  // with a memory fence: work queued before it is visible first
};

enum CUstreamCaptureStatus : int {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
};

enum CUevent_flags : unsigned int {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,  // the cheap kind: Ferry uses events for ordering only
};

// Batched copies (cuMemcpyBatchAsync): what each copy's attributes say. Ferry's sources are pinned bounce
// buffers read in stream order; the location hints apply to managed memory only and stay unset.
enum CUmemcpySrcAccessOrder : int {
  CU_MEMCPY_SRC_ACCESS_ORDER_INVALID = 0x0,
  CU_MEMCPY_SRC_ACCESS_ORDER_STREAM = 0x1,
};

enum CUmemLocationType : int {
  CU_MEM_LOCATION_TYPE_INVALID = 0x0,
};

struct CUmemLocation {
  CUmemLocationType type;
  int id;
};

enum CUmemcpyFlags : unsigned int {
  CU_MEMCPY_FLAG_DEFAULT = 0x0,
};

struct CUmemcpyAttributes {
  CUmemcpySrcAccessOrder srcAccessOrder;
  CUmemLocation srcLocHint;
  CUmemLocation dstLocHint;
  unsigned int flags;
};

// Function types, one per exported symbol Ferry loads (`cuMemAlloc_v2_fn`), from the list in cuda_symbols.hpp.
#define FERRY_CUDA_FUNCTION_TYPE_(need, symbol, result, parameters) using symbol##_fn = result(*) parameters;
FERRY_CUDA_DRIVER_SYMBOLS(FERRY_CUDA_FUNCTION_TYPE_)
#undef FERRY_CUDA_FUNCTION_TYPE_

}  // namespace ferry::detail
