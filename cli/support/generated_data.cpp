// Generated file contents: see cli/support/generated_data.hpp.
#include "cli/support/generated_data.hpp"

#include <algorithm>
#include <cstring>

namespace ferry::cli {

void fill_generated(std::uint8_t* dst, std::uint64_t size, std::uint64_t file_offset) {
  // One 64-bit mix per 8-byte word of the file: position-dependent, so misplaced data cannot match.
  std::uint64_t at = file_offset;
  std::uint64_t end = file_offset + size;
  while (at < end) {
    std::uint64_t word = at / 8;
    std::uint64_t x = (word + 1) * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    std::uint64_t in_word = at % 8;
    std::uint64_t n = std::min<std::uint64_t>(8 - in_word, end - at);
    std::memcpy(dst + (at - file_offset), reinterpret_cast<const std::uint8_t*>(&x) + in_word, n);
    at += n;
  }
}

}  // namespace ferry::cli
