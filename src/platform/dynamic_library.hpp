// Opening the GPU libraries at run time: Ferry links neither libcuda nor libcufile, so it builds and runs
// on machines without them. Libraries are opened with RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE and never
// closed: the function tables that point into them live as long as the process.
// Thread safety: all functions may be called from any thread (dlopen/dlsym are thread-safe; dlerror is
// per thread on glibc).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::detail {

/// dlopen()s `name`. Errors: unavailable, "libcuda.so.1 not found: <dlerror text>" when the file is absent,
/// "libx.so could not be loaded: <dlerror text>" for any other failure (wrong architecture, missing
/// dependency, ...).
[[nodiscard]] Result<void*> open_dynamic_library(const char* name);

/// Whether a library whose file is `stem` or `stem.<version>` (libcuda.so, libcuda.so.1, ...) is loaded into
/// the process now. Walks the loader's list of objects and opens no file: dlopen with RTLD_NOLOAD searched
/// the library path each time it found nothing (20-50 us for every host read of a process without CUDA).
bool library_loaded(std::string_view stem);

/// A number that changes whenever the process loads or unloads a shared object (0 if the loader cannot
/// say): an answer of library_loaded() holds while it stays the same.
std::uint64_t loaded_libraries_version();

/// dlsym()s `symbol` from `handle`, clearing dlerror() first. Errors: unavailable, naming the library, the
/// symbol and dlerror()'s text.
[[nodiscard]] Result<void*> find_symbol(void* handle, const char* library, const char* symbol);

/// How a function table treats one symbol of its list (platform/cuda/cuda_symbols.hpp,
/// platform/cufile/cufile_symbols.hpp).
enum class SymbolNeed {
  required,     // loading the table fails without it
  optional,     // left null where the library lacks it; callers check before calling
  v2_or_plain,  // required; the `_v2` export where the library has it, else (older libraries) the plain name
};

/// Looks up `symbol` (a name ending in "_v2" for v2_or_plain) as `need` says. A missing optional symbol gives
/// nullptr, and its name is appended to `missing_optional` when that is given. Errors: unavailable (as
/// find_symbol) for a missing required symbol; for v2_or_plain the message names the plain one.
[[nodiscard]] Result<void*> find_listed_symbol(void* handle, const char* library, const char* symbol, SymbolNeed need,
                                               std::vector<std::string>* missing_optional = nullptr);

/// find_listed_symbol, with the address stored in `out` cast to the table member's type.
template <typename Fn>
[[nodiscard]] Status load_listed_symbol(void* handle, const char* library, const char* symbol, SymbolNeed need,
                                        Fn& out, std::vector<std::string>* missing_optional = nullptr) {
  Result<void*> address = find_listed_symbol(handle, library, symbol, need, missing_optional);
  if (!address.ok()) return address.status();
  out = reinterpret_cast<Fn>(*address);
  return Status();
}

}  // namespace ferry::detail
