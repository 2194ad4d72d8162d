// Ferry's CUDA declarations (src/platform/cuda/cuda_abi.hpp) against the real cuda.h, where installed.
// The library never includes cuda.h; this test is what keeps the two in step.
#include "platform/cuda/cuda_abi.hpp"
#include "platform/cuda/cuda_api.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

#if __has_include(<cuda.h>)
#include <cuda.h>
#define FERRY_TEST_HAVE_CUDA_H 1
#else
#define FERRY_TEST_HAVE_CUDA_H 0
#endif

namespace fd = ferry::detail;

#if FERRY_TEST_HAVE_CUDA_H
// Sizes and the values Ferry passes or compares.
static_assert(sizeof(fd::CUresult) == sizeof(::CUresult));
static_assert(sizeof(fd::CUdevice) == sizeof(::CUdevice));
static_assert(sizeof(fd::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(std::is_same_v<fd::CUdeviceptr, ::CUdeviceptr>);
static_assert(sizeof(fd::CUcontext) == sizeof(::CUcontext));
static_assert(sizeof(fd::CUstream) == sizeof(::CUstream));
static_assert(sizeof(fd::CUevent) == sizeof(::CUevent));
static_assert(sizeof(fd::CUpointer_attribute) == sizeof(::CUpointer_attribute));
static_assert(sizeof(fd::CUdevice_attribute) == sizeof(::CUdevice_attribute));

#define FERRY_SAME_VALUE_(name) static_assert(static_cast<long long>(fd::name) == static_cast<long long>(::name), #name)
FERRY_SAME_VALUE_(CUDA_SUCCESS);
FERRY_SAME_VALUE_(CUDA_ERROR_INVALID_VALUE);
FERRY_SAME_VALUE_(CUDA_ERROR_OUT_OF_MEMORY);
FERRY_SAME_VALUE_(CUDA_ERROR_NOT_INITIALIZED);
FERRY_SAME_VALUE_(CUDA_ERROR_DEINITIALIZED);
FERRY_SAME_VALUE_(CUDA_ERROR_STUB_LIBRARY);
FERRY_SAME_VALUE_(CUDA_ERROR_DEVICE_UNAVAILABLE);
FERRY_SAME_VALUE_(CUDA_ERROR_NO_DEVICE);
FERRY_SAME_VALUE_(CUDA_ERROR_INVALID_DEVICE);
FERRY_SAME_VALUE_(CUDA_ERROR_INVALID_CONTEXT);
FERRY_SAME_VALUE_(CUDA_ERROR_INVALID_HANDLE);
FERRY_SAME_VALUE_(CUDA_ERROR_NOT_FOUND);
FERRY_SAME_VALUE_(CUDA_ERROR_NOT_READY);
FERRY_SAME_VALUE_(CUDA_ERROR_ILLEGAL_ADDRESS);
FERRY_SAME_VALUE_(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
FERRY_SAME_VALUE_(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
FERRY_SAME_VALUE_(CUDA_ERROR_NOT_PERMITTED);
FERRY_SAME_VALUE_(CUDA_ERROR_NOT_SUPPORTED);
FERRY_SAME_VALUE_(CUDA_ERROR_SYSTEM_NOT_READY);
FERRY_SAME_VALUE_(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
FERRY_SAME_VALUE_(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE);
FERRY_SAME_VALUE_(CUDA_ERROR_UNKNOWN);
FERRY_SAME_VALUE_(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
FERRY_SAME_VALUE_(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
FERRY_SAME_VALUE_(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
FERRY_SAME_VALUE_(CU_POINTER_ATTRIBUTE_CONTEXT);
FERRY_SAME_VALUE_(CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
FERRY_SAME_VALUE_(CU_POINTER_ATTRIBUTE_DEVICE_POINTER);
FERRY_SAME_VALUE_(CU_POINTER_ATTRIBUTE_HOST_POINTER);
FERRY_SAME_VALUE_(CU_POINTER_ATTRIBUTE_IS_MANAGED);
FERRY_SAME_VALUE_(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
FERRY_SAME_VALUE_(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
FERRY_SAME_VALUE_(CU_POINTER_ATTRIBUTE_RANGE_SIZE);
FERRY_SAME_VALUE_(CU_POINTER_ATTRIBUTE_MAPPED);
FERRY_SAME_VALUE_(CU_MEMORYTYPE_HOST);
FERRY_SAME_VALUE_(CU_MEMORYTYPE_DEVICE);
FERRY_SAME_VALUE_(CU_MEMORYTYPE_ARRAY);
FERRY_SAME_VALUE_(CU_MEMORYTYPE_UNIFIED);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_INTEGRATED);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
FERRY_SAME_VALUE_(CU_STREAM_DEFAULT);
FERRY_SAME_VALUE_(CU_STREAM_NON_BLOCKING);
FERRY_SAME_VALUE_(CU_EVENT_DEFAULT);
FERRY_SAME_VALUE_(CU_EVENT_BLOCKING_SYNC);
FERRY_SAME_VALUE_(CU_EVENT_DISABLE_TIMING);
FERRY_SAME_VALUE_(CU_STREAM_WAIT_VALUE_GEQ);
FERRY_SAME_VALUE_(CU_STREAM_WAIT_VALUE_EQ);
FERRY_SAME_VALUE_(CU_STREAM_WRITE_VALUE_DEFAULT);
FERRY_SAME_VALUE_(CU_STREAM_CAPTURE_STATUS_NONE);
FERRY_SAME_VALUE_(CU_STREAM_CAPTURE_STATUS_ACTIVE);
FERRY_SAME_VALUE_(CU_STREAM_CAPTURE_STATUS_INVALIDATED);
FERRY_SAME_VALUE_(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
FERRY_SAME_VALUE_(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
#if CUDA_VERSION >= 12020
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_NUMA_ID);
FERRY_SAME_VALUE_(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
#endif
FERRY_SAME_VALUE_(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID);
FERRY_SAME_VALUE_(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
FERRY_SAME_VALUE_(CU_MEM_LOCATION_TYPE_INVALID);
FERRY_SAME_VALUE_(CU_MEMCPY_FLAG_DEFAULT);
#undef FERRY_SAME_VALUE_
// The batched copy's attributes are passed as an array: the layout must be the driver's.
static_assert(sizeof(fd::CUmemcpyAttributes) == sizeof(::CUmemcpyAttributes));
static_assert(offsetof(fd::CUmemcpyAttributes, srcLocHint) == offsetof(::CUmemcpyAttributes, srcLocHint));
static_assert(offsetof(fd::CUmemcpyAttributes, dstLocHint) == offsetof(::CUmemcpyAttributes, dstLocHint));
static_assert(offsetof(fd::CUmemcpyAttributes, flags) == offsetof(::CUmemcpyAttributes, flags));
static_assert(fd::kMemHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE);
static_assert(fd::kMemHostAllocDeviceMap == CU_MEMHOSTALLOC_DEVICEMAP);
static_assert(fd::kMemHostAllocWriteCombined == CU_MEMHOSTALLOC_WRITECOMBINED);
static_assert(fd::kMemHostRegisterPortable == CU_MEMHOSTREGISTER_PORTABLE);
static_assert(fd::kMemHostRegisterDeviceMap == CU_MEMHOSTREGISTER_DEVICEMAP);
static_assert(fd::kMemHostRegisterReadOnly == CU_MEMHOSTREGISTER_READ_ONLY);

// The symbol each member is loaded from must be the one cuda.h's macros select.
#define FERRY_SAME_SYMBOL_(plain, versioned) \
  static_assert(std::is_same_v<decltype(&::plain), decltype(&::versioned)>, #plain " is not " #versioned)
FERRY_SAME_SYMBOL_(cuDeviceTotalMem, cuDeviceTotalMem_v2);
FERRY_SAME_SYMBOL_(cuMemAlloc, cuMemAlloc_v2);
FERRY_SAME_SYMBOL_(cuMemFree, cuMemFree_v2);
FERRY_SAME_SYMBOL_(cuMemHostRegister, cuMemHostRegister_v2);
FERRY_SAME_SYMBOL_(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
FERRY_SAME_SYMBOL_(cuStreamDestroy, cuStreamDestroy_v2);
FERRY_SAME_SYMBOL_(cuEventDestroy, cuEventDestroy_v2);
FERRY_SAME_SYMBOL_(cuStreamWaitValue32, cuStreamWaitValue32_v2);
FERRY_SAME_SYMBOL_(cuStreamWriteValue32, cuStreamWriteValue32_v2);
FERRY_SAME_SYMBOL_(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2);
FERRY_SAME_SYMBOL_(cuMemcpyBatchAsync, cuMemcpyBatchAsync_v2);
#undef FERRY_SAME_SYMBOL_
#endif

// Function types: same parameter and result sizes as cuda.h's, argument by argument, so that a mistake that
// would corrupt memory (sizes passed as 32-bit, pointers as integers) does not compile.
template <typename R1, typename... A1, typename R2, typename... A2>
constexpr bool same_shape(R1 (*)(A1...), R2 (*)(A2...)) {
  if constexpr (sizeof...(A1) != sizeof...(A2)) {
    return false;
  } else {
    return sizeof(R1) == sizeof(R2) && ((sizeof(A1) == sizeof(A2)) && ...);
  }
}

#if FERRY_TEST_HAVE_CUDA_H
// Every entry point of cuda_symbols.hpp: the exported name is the one cuda.h declares (through its _v2 macros).
#define FERRY_SAME_SHAPE_(need, symbol, result, parameters) \
  static_assert(same_shape(fd::symbol##_fn{}, &::symbol), #symbol " differs from cuda.h");
FERRY_CUDA_DRIVER_SYMBOLS(FERRY_SAME_SHAPE_)
#undef FERRY_SAME_SHAPE_
#endif

TEST(CudaAbi, MatchesCudaHeaderWhereInstalled) {
#if FERRY_TEST_HAVE_CUDA_H
  // The static_asserts above did the work; this records that they ran.
  EXPECT_GE(CUDA_VERSION, 12000);
#else
  GTEST_SKIP() << "cuda.h is not installed here (looked in FERRY_CUDA_INCLUDE_DIRS); the ABI is checked where it is";
#endif
}
