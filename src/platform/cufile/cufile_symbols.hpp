// The one list of cuFile entry points Ferry calls. Everything else is generated from it: the function
// pointer types (cufile_abi.hpp), the members of CuFileApi (cufile_api.hpp), their loading (cufile_api.cpp)
// and the fake cuFile's table (tests/support/fake_cufile.cpp).
//
// FERRY_CUFILE_SYMBOLS(X) calls X(need, symbol, result, (parameters)) once per entry point:
// - need: a SymbolNeed (platform/dynamic_library.hpp). `required`: CuFileApi::load fails without it;
//   `optional`: null where this libcufile lacks it, and named in CuFileApi::missing_optional;
//   `v2_or_plain`: cufile.h's macro points cuFileDriverClose at the _v2 entry, which older libraries lack,
//   so their plain cuFileDriverClose is taken instead.
// - symbol: the exported name, and the name of the type (`cuFileRead_fn`) and of the member.
// The order is the order of loading, so a library missing several symbols is reported by the first.
#pragma once

// clang-format off
#define FERRY_CUFILE_SYMBOLS(X)                                                                               \
  X(required, cuFileDriverOpen, CUfileError_t, ())                                                            \
  X(v2_or_plain, cuFileDriverClose_v2, CUfileError_t, ())                                                     \
  X(required, cuFileDriverGetProperties, CUfileError_t, (CUfileDrvProps_t* props))                            \
  X(required, cuFileHandleRegister, CUfileError_t, (CUfileHandle_t* handle, CUfileDescr_t* descr))            \
  X(required, cuFileHandleDeregister, void, (CUfileHandle_t handle))                                          \
  X(required, cuFileRead, ssize_t,                                                                            \
    (CUfileHandle_t handle, void* base, std::size_t size, off_t file_offset, off_t buffer_offset))            \
  X(required, cuFileWrite, ssize_t,                                                                           \
    (CUfileHandle_t handle, const void* base, std::size_t size, off_t file_offset, off_t buffer_offset))      \
  X(optional, cuFileGetVersion, CUfileError_t, (int* version))                                                \
  X(optional, cuFileSetStatsLevel, CUfileError_t, (int level))                                                \
  X(optional, cuFileStatsStart, CUfileError_t, ())                                                            \
  X(optional, cuFileStatsReset, CUfileError_t, ())                                                            \
  X(optional, cuFileGetStatsL1, CUfileError_t, (CUfileStatsLevel1_t* stats))                                  \
  X(optional, cuFileGetStatsL3, CUfileError_t, (CUfileStatsLevel3_t* stats))                                  \
  X(optional, cuFileGetParameterBool, CUfileError_t, (CUFileBoolConfigParameter_t param, bool* value))
// clang-format on
