// Opening the GPU libraries at run time: Ferry links neither libcuda nor libcufile, so it builds and runs
// on machines without them. Libraries are opened with RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE and never
// closed: the function tables that point into them live as long as the process.
// Thread safety: all functions may be called from any thread (dlopen/dlsym are thread-safe; dlerror is
// per thread on glibc).
#pragma once

#include <string>

#include "ferry/status.hpp"

namespace ferry::detail {

/// dlopen()s `name`. Errors: unavailable, "libcuda.so.1 not found: <dlerror text>" when the file is absent,
/// "libx.so could not be loaded: <dlerror text>" for any other failure (wrong architecture, missing
/// dependency, ...).
[[nodiscard]] Result<void*> open_dynamic_library(const char* name);

/// dlsym()s `symbol` from `handle`, clearing dlerror() first. Errors: unavailable, naming the library, the
/// symbol and dlerror()'s text.
[[nodiscard]] Result<void*> find_symbol(void* handle, const char* library, const char* symbol);

/// Looks up `symbol` and stores it, cast to the table member's type, in `out`.
template <typename Fn>
[[nodiscard]] Status load_symbol(void* handle, const char* library, const char* symbol, Fn& out) {
  Result<void*> address = find_symbol(handle, library, symbol);
  if (!address.ok()) return address.status();
  out = reinterpret_cast<Fn>(*address);
  return Status();
}

/// Like load_symbol, but a missing symbol leaves `out` null and returns false instead of failing.
template <typename Fn>
bool load_optional_symbol(void* handle, const char* library, const char* symbol, Fn& out) {
  Result<void*> address = find_symbol(handle, library, symbol);
  out = address.ok() ? reinterpret_cast<Fn>(*address) : nullptr;
  return address.ok();
}

}  // namespace ferry::detail
