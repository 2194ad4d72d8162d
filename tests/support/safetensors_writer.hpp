// Writing safetensors files by hand for tests: the format is an 8-byte little-endian length, JSON, data.
// SafetensorsBuilder lays tensors out back to back (each tensor's bytes are the pattern of test_files.hpp
// at a seed-dependent offset, so misplaced bytes never compare equal) and can break any rule on purpose:
// raw JSON, a wrong length prefix, extra or missing data bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ferry::testing {

struct TensorSpec {
  std::string name;
  std::string dtype;                   // the format's spelling, or anything (bad-input tests)
  std::vector<std::uint64_t> shape;
  std::uint64_t element_size = 0;      // 0: derived from dtype (unknown dtypes: 1)
};

class SafetensorsBuilder {
 public:
  SafetensorsBuilder& add(TensorSpec spec);
  SafetensorsBuilder& metadata(std::string key, std::string value);
  /// Bytes before the first tensor's data that belong to no tensor (to make odd offsets).
  SafetensorsBuilder& pad_header_to(std::uint64_t multiple);

  /// The header JSON the builder would write.
  std::string json() const;
  /// The data section: every tensor's bytes, in order.
  std::vector<std::uint8_t> data() const;
  /// The bytes of tensor `i`.
  std::vector<std::uint8_t> tensor_bytes(std::size_t i) const;
  /// [begin, end) of tensor `i` in the data section.
  std::pair<std::uint64_t, std::uint64_t> offsets(std::size_t i) const;
  const std::vector<TensorSpec>& specs() const { return specs_; }

  /// prefix + json() (padded) + data().
  std::vector<std::uint8_t> bytes() const;
  std::string write(const std::filesystem::path& path) const;

 private:
  std::vector<TensorSpec> specs_;
  std::map<std::string, std::string> metadata_;
  std::uint64_t pad_to_ = 8;
};

/// Bytes of a safetensors file made of `json` and `data`, with the prefix saying `json.size()` (or
/// `length_override` when given).
std::vector<std::uint8_t> safetensors_bytes(const std::string& json, const std::vector<std::uint8_t>& data,
                                            std::int64_t length_override = -1);
std::string write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes);

/// Element size of a safetensors dtype name (1 for names it does not know).
std::uint64_t element_size_of(const std::string& dtype);

}  // namespace ferry::testing
