// Text helpers that must not follow the process's locale (Python sets LC_CTYPE from the environment):
// setting values, URL schemes and hosts, PCI addresses.
#pragma once

#include <string>
#include <string_view>

namespace ferry::detail {

/// `s` with ASCII capitals made small; every other byte as it was.
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace ferry::detail
