// cufile_forced_compat: cuFile's own answer where it can give one, else the environment parsed its way.
#include "platform/cufile/cufile_env.hpp"

#include <strings.h>

#include <cstdlib>

namespace ferry::detail {

std::optional<bool> parse_cufile_bool(std::string_view text) {
  auto is = [&](const char* word) {
    return text.size() == std::char_traits<char>::length(word) && ::strncasecmp(text.data(), word, text.size()) == 0;
  };
  if (is("true")) return true;
  if (is("false")) return false;
  return std::nullopt;
}

std::string ForcedCompat::describe() const {
  if (source == "unset") return std::string(kCuFileForceCompatVariable) + " is not set";
  std::string out = std::string(kCuFileForceCompatVariable) + "=" + value;
  if (unrecognised) return out + " (not a value cuFile reads as true or false: ignored)";
  return out + " (" + (source == "cuFile" ? "cuFile reads it as " : "read as ") + (forced ? "true" : "false") + ")";
}

ForcedCompat cufile_forced_compat(const CuFileApi* api) {
  ForcedCompat f;
  const char* value = std::getenv(kCuFileForceCompatVariable);
  if (value != nullptr) f.value = value;
  if (api != nullptr && api->cuFileGetParameterBool != nullptr) {
    bool forced = false;
    if (api->cuFileGetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE, &forced).err == CU_FILE_SUCCESS) {
      f.forced = forced;
      f.source = value ? "cuFile" : "unset";
      f.unrecognised = value != nullptr && !parse_cufile_bool(f.value).has_value() && !forced;
      return f;
    }
  }
  if (value == nullptr) {
    f.source = "unset";
    return f;
  }
  f.source = "environment";
  std::optional<bool> parsed = parse_cufile_bool(f.value);
  f.unrecognised = !parsed.has_value();
  f.forced = parsed.value_or(false);
  return f;
}

}  // namespace ferry::detail
