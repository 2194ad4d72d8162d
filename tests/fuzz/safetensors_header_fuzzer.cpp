// libFuzzer target for the safetensors header parser (src/safetensors/header.cpp). Built with clang by
// scripts/fuzz-safetensors.sh (CMake option FERRY_BUILD_FUZZERS), with AddressSanitizer and UBSan.
//
// The first byte picks the mode, so that the fuzzer reaches deep validation without having to guess a
// matching 8-byte length: odd -> the rest is a whole file (prefix, header, data: parse_file_image); even ->
// the rest is header JSON over a data section of (first byte / 2) bytes (parse_header).
//
// Besides crashes, leaks and undefined behaviour, it checks what a caller relies on: an accepted header
// covers its data section exactly with in-bounds, dtype-aligned spans sorted by offset; a refusal is
// invalid_argument with a non-empty message that is valid UTF-8 (messages become Python str).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ferry/safetensors.hpp"

namespace {

using namespace ferry::safetensors;

void check(bool condition) {
  if (!condition) __builtin_trap();
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

void check_result(const ferry::Result<Header>& r) {
  if (!r.ok()) {
    check(r.status().code() == ferry::ErrorCode::invalid_argument);
    check(!r.status().message().empty());
    check(valid_utf8(r.status().message()));
    check(r.status().message().size() < 4096);
    return;
  }
  const Header& h = *r;
  std::uint64_t covered = 0;
  for (const TensorInfo& t : h.tensors) {
    check(t.data_begin == covered);
    check(t.data_begin <= t.data_end && t.data_end <= h.data_bytes);
    check(t.size_bytes() == t.element_count() * dtype_size(t.dtype));
    check(t.file_offset == h.data_offset() + t.data_begin);
    check(t.name != "__metadata__");
    check(dtype_from_name(dtype_name(t.dtype)) == t.dtype);
    covered = t.data_end;
  }
  check(covered == h.data_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  ParseOptions options;
  options.max_header_bytes = 1 << 20;
  const std::uint8_t mode = data[0];
  const std::uint8_t* rest = data + 1;
  const std::size_t n = size - 1;
  if (mode & 1) {
    check_result(parse_file_image(rest, n, "fuzz.safetensors", options));
  } else {
    std::string_view json(reinterpret_cast<const char*>(rest), n);
    check_result(parse_header(json, n, mode / 2, "fuzz.safetensors", options));
  }
  return 0;
}
