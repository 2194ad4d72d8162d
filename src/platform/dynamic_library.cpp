#include "platform/dynamic_library.hpp"

#include <dlfcn.h>

#include <string_view>

namespace ferry::detail {

namespace {
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

Result<void*> find_symbol(void* handle, const char* library, const char* symbol) {
  dlerror();  // a stale error would be mistaken for this lookup's
  void* address = dlsym(handle, symbol);
  const char* error = dlerror();
  if (error == nullptr && address != nullptr) return address;
  return Status(ErrorCode::unavailable, std::string(library) + " has no symbol " + symbol + ": " +
                                            (error ? error : "the symbol resolved to null"));
}

}  // namespace ferry::detail
