// GpuKernels: the PTX text and the driver entry points, resolved by name.
#include "support/gpu_kernels.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <string>
#include <type_traits>

namespace ferry::testing {
namespace {

// count_mismatches(a, b, n, out) and fill(p, n, value), grid-stride loops over bytes. Written by hand for
// sm_80 and later; the driver JIT-compiles it for the GPU at hand.
constexpr const char* kPtx = R"PTX(
.version 8.0
.target sm_80
.address_size 64

// count_mismatches(const u8* a, const u8* b, u64 n, u64* out): *out += the bytes where a and b differ.
.visible .entry count_mismatches(.param .u64 a, .param .u64 b, .param .u64 n, .param .u64 out)
{
  .reg .pred %p<3>;
  .reg .b16 %h<3>;
  .reg .b32 %r<5>;
  .reg .b64 %d<14>;
  ld.param.u64 %d1, [a];
  ld.param.u64 %d2, [b];
  ld.param.u64 %d3, [n];
  ld.param.u64 %d4, [out];
  cvta.to.global.u64 %d1, %d1;
  cvta.to.global.u64 %d2, %d2;
  cvta.to.global.u64 %d4, %d4;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %d5, %r1, %r2;
  cvt.u64.u32 %d6, %r3;
  add.u64 %d5, %d5, %d6;
  mul.wide.u32 %d7, %r4, %r2;
  mov.u64 %d8, 0;
LOOP:
  setp.ge.u64 %p1, %d5, %d3;
  @%p1 bra DONE;
  add.u64 %d9, %d1, %d5;
  ld.global.u8 %h1, [%d9];
  add.u64 %d10, %d2, %d5;
  ld.global.u8 %h2, [%d10];
  setp.ne.u16 %p2, %h1, %h2;
  selp.u64 %d11, 1, 0, %p2;
  add.u64 %d8, %d8, %d11;
  add.u64 %d5, %d5, %d7;
  bra LOOP;
DONE:
  setp.eq.u64 %p1, %d8, 0;
  @%p1 bra END;
  atom.global.add.u64 %d12, [%d4], %d8;
END:
  ret;
}

// fill(u8* p, u64 n, u32 value): p[i] = value for every i < n.
.visible .entry fill(.param .u64 p, .param .u64 n, .param .u32 value)
{
  .reg .pred %p<2>;
  .reg .b16 %h<2>;
  .reg .b32 %r<6>;
  .reg .b64 %d<10>;
  ld.param.u64 %d1, [p];
  ld.param.u64 %d3, [n];
  ld.param.u32 %r5, [value];
  cvt.u16.u32 %h1, %r5;
  cvta.to.global.u64 %d1, %d1;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %d5, %r1, %r2;
  cvt.u64.u32 %d6, %r3;
  add.u64 %d5, %d5, %d6;
  mul.wide.u32 %d7, %r4, %r2;
FLOOP:
  setp.ge.u64 %p1, %d5, %d3;
  @%p1 bra FEND;
  add.u64 %d9, %d1, %d5;
  st.global.u8 [%d9], %h1;
  add.u64 %d5, %d5, %d7;
  bra FLOOP;
FEND:
  ret;
}
)PTX";

constexpr unsigned kThreads = 256;

}  // namespace

GpuKernels::GpuKernels() {
  library_ = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) {
    why_ = std::string("libcuda.so.1: ") + ::dlerror();
    return;
  }
  auto resolve = [&](auto& member, const char* name) {
    member = reinterpret_cast<std::remove_reference_t<decltype(member)>>(::dlsym(library_, name));
    if (member == nullptr && why_.empty()) why_ = std::string("libcuda.so.1 has no ") + name;
  };
  resolve(module_load_data_, "cuModuleLoadData");
  resolve(module_get_function_, "cuModuleGetFunction");
  resolve(module_unload_, "cuModuleUnload");
  resolve(launch_kernel_, "cuLaunchKernel");
  resolve(memcpy_dtod_async_, "cuMemcpyDtoDAsync_v2");
  resolve(begin_capture_, "cuStreamBeginCapture_v2");
  resolve(end_capture_, "cuStreamEndCapture");
  resolve(graph_destroy_, "cuGraphDestroy");
}

GpuKernels::~GpuKernels() {
  if (module_ != nullptr) (void)module_unload_(module_);
  if (library_ != nullptr) ::dlclose(library_);
}

detail::CUresult GpuKernels::load() {
  if (module_ != nullptr) return detail::CUDA_SUCCESS;
  if (detail::CUresult rc = module_load_data_(&module_, kPtx); rc != detail::CUDA_SUCCESS) return rc;
  if (detail::CUresult rc = module_get_function_(&count_fn_, module_, "count_mismatches"); rc != detail::CUDA_SUCCESS) {
    return rc;
  }
  return module_get_function_(&fill_fn_, module_, "fill");
}

detail::CUresult GpuKernels::launch(void* function, std::uint64_t n, void** params, detail::CUstream stream) {
  const std::uint64_t blocks = std::clamp<std::uint64_t>((n + kThreads - 1) / kThreads, 1, 4096);
  return launch_kernel_(function, static_cast<unsigned>(blocks), 1, 1, kThreads, 1, 1, 0, stream, params, nullptr);
}

detail::CUresult GpuKernels::count_mismatches(detail::CUdeviceptr a, detail::CUdeviceptr b, std::uint64_t n,
                                              detail::CUdeviceptr mismatches, detail::CUstream stream) {
  if (detail::CUresult rc = load(); rc != detail::CUDA_SUCCESS) return rc;
  void* params[] = {&a, &b, &n, &mismatches};
  return launch(count_fn_, n, params, stream);
}

detail::CUresult GpuKernels::fill(detail::CUdeviceptr p, std::uint64_t n, std::uint8_t value,
                                  detail::CUstream stream) {
  if (detail::CUresult rc = load(); rc != detail::CUDA_SUCCESS) return rc;
  std::uint32_t word = value;
  void* params[] = {&p, &n, &word};
  return launch(fill_fn_, n, params, stream);
}

detail::CUresult GpuKernels::copy(detail::CUdeviceptr dst, detail::CUdeviceptr src, std::uint64_t n,
                                  detail::CUstream stream) {
  return memcpy_dtod_async_(dst, src, n, stream);
}

detail::CUresult GpuKernels::begin_capture(detail::CUstream stream) {
  return begin_capture_(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */);
}

detail::CUresult GpuKernels::end_capture(detail::CUstream stream) {
  void* graph = nullptr;
  detail::CUresult rc = end_capture_(stream, &graph);
  if (graph != nullptr) (void)graph_destroy_(graph);
  return rc;
}

}  // namespace ferry::testing
