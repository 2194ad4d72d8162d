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

/// `s` without the ASCII white space (space, \t, \n, \v, \f, \r) at either end.
inline std::string_view trim_ascii(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const auto begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

}  // namespace ferry::detail
