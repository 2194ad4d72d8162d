// CUFILE_FORCE_COMPAT_MODE, read one way everywhere: the router, the doctor's settings section and its
// prediction all ask cufile_forced_compat(), so their answers cannot disagree.
//
// cuFile itself is the authority on what the variable means. Where its driver is open and the library
// has cuFileGetParameterBool (cuFile 1.14+), Ferry asks it; otherwise (cuFile missing or older, or the doctor
// before loading it) Ferry parses the variable with parse_cufile_bool, whose spellings were checked
// against cuFile's own reading on the GPU machine (tests/gpu/cufile_env_test.cpp).
// Thread safety: all functions may be called from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "platform/cufile/cufile_api.hpp"

namespace ferry::detail {

inline constexpr const char* kCuFileForceCompatVariable = "CUFILE_FORCE_COMPAT_MODE";

/// A boolean environment value as cuFile 1.15 reads it (asked of cuFile itself on the GPU machine, one
/// fresh process per spelling: tests/gpu/issue_9_gpu_test.cpp): "true" in any case is true, "false" in
/// any case false. Anything else ("1", "yes", "on", " true", "") is nullopt: cuFile ignores it and keeps
/// its default, false.
std::optional<bool> parse_cufile_bool(std::string_view text);

struct ForcedCompat {
  bool forced = false;
  std::string value;   // the variable's text; empty when unset
  std::string source;  // "cuFile" (asked with cuFileGetParameterBool), "environment" or "unset"
  bool unrecognised = false;  // set but neither true nor false (then not forced)

  /// "CUFILE_FORCE_COMPAT_MODE=yes (cuFile reads it as true)".
  std::string describe() const;
};

/// Whether cuFile runs only its POSIX path because of CUFILE_FORCE_COMPAT_MODE. `api`: a library whose
/// driver is open, or nullptr to parse the environment. (cuFile takes the variable in when its driver
/// opens: before that, cuFileGetParameterBool answers its default, false, whatever the variable says.
/// Seen on the GPU machine with cuFile 1.15.)
ForcedCompat cufile_forced_compat(const CuFileApi* api);

}  // namespace ferry::detail
