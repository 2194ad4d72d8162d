#include "platform/dynamic_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstddef>
#include <mutex>
#include <string_view>

#include "base/fork_guard.hpp"

namespace ferry::detail {

namespace {

// Held around Ferry's walks of the loaded objects, and across every fork(): dl_iterate_phdr holds the loader's
// lock while it walks, and a child forked meanwhile (a data loader's worker, while another thread reads through
// Ferry) found that lock held for good at its own first read
// (Fork.AChildForkedWhileAnotherThreadWalksTheLoadedLibrariesWalksThemToo).
std::mutex g_walk_mutex;
[[maybe_unused]] const bool g_walk_mutex_forks = (hold_across_fork(g_walk_mutex), true);

std::string take_dlerror() {
  const char* text = dlerror();
  return text ? std::string(text) : std::string("no error text from dlerror()");
}
}  // namespace

Result<void*> open_dynamic_library(const char* name) {
  dlerror();
  void* handle = dlopen(name, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
  if (handle != nullptr) return handle;
  std::string why = take_dlerror();
  // "not found" is what people search for; keep the loader's own words after it either way.
  bool absent = std::string_view(why).find("No such file") != std::string_view::npos;
  return Status(ErrorCode::unavailable,
                std::string(name) + (absent ? " not found: " : " could not be loaded: ") + why);
}

bool library_loaded(std::string_view stem) {
  auto visit = [](dl_phdr_info* info, std::size_t, void* data) -> int {
    const std::string_view want = *static_cast<std::string_view*>(data);
    std::string_view file = info->dlpi_name != nullptr ? info->dlpi_name : "";
    if (auto slash = file.rfind('/'); slash != std::string_view::npos) file.remove_prefix(slash + 1);
    const bool same = file.starts_with(want) && (file.size() == want.size() || file[want.size()] == '.');
    return same ? 1 : 0;  // non-zero stops the walk and is dl_iterate_phdr's answer
  };
  std::lock_guard<std::mutex> lock(g_walk_mutex);
  return dl_iterate_phdr(visit, &stem) != 0;
}

std::uint64_t loaded_libraries_version() {
  std::uint64_t version = 0;
  auto first = [](dl_phdr_info* info, std::size_t size, void* data) -> int {
    // dlpi_adds and dlpi_subs count every load and unload since the process began (glibc 2.4 and later).
    if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
      *static_cast<std::uint64_t*>(data) = info->dlpi_adds + info->dlpi_subs;
    }
    return 1;  // the first object says it: stop
  };
  std::lock_guard<std::mutex> lock(g_walk_mutex);
  dl_iterate_phdr(first, &version);
  return version;
}

Result<void*> find_symbol(void* handle, const char* library, const char* symbol) {
  dlerror();  // a stale error would be mistaken for this lookup's
  void* address = dlsym(handle, symbol);
  const char* error = dlerror();
  if (error == nullptr && address != nullptr) return address;
  return Status(ErrorCode::unavailable, std::string(library) + " has no symbol " + symbol + ": " +
                                            (error ? error : "the symbol resolved to null"));
}

Result<void*> find_listed_symbol(void* handle, const char* library, const char* symbol, SymbolNeed need,
                                 std::vector<std::string>* missing_optional) {
  switch (need) {
    case SymbolNeed::required:
      return find_symbol(handle, library, symbol);
    case SymbolNeed::optional: {
      Result<void*> address = find_symbol(handle, library, symbol);
      if (address.ok()) return address;
      if (missing_optional != nullptr) missing_optional->push_back(symbol);
      return static_cast<void*>(nullptr);
    }
    case SymbolNeed::v2_or_plain: {
      Result<void*> address = find_symbol(handle, library, symbol);
      if (address.ok()) return address;
      std::string_view name(symbol);
      constexpr std::string_view kSuffix = "_v2";
      if (name.ends_with(kSuffix)) name.remove_suffix(kSuffix.size());
      return find_symbol(handle, library, std::string(name).c_str());
    }
  }
  return Status(ErrorCode::internal, std::string("unknown SymbolNeed for ") + symbol);
}

}  // namespace ferry::detail
