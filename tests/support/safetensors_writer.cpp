// SafetensorsBuilder: hand-made checkpoints for tests.
#include "support/safetensors_writer.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/test_files.hpp"

namespace ferry::testing {

std::uint64_t element_size_of(const std::string& dtype) {
  static const std::map<std::string, std::uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"U16", 2}, {"I16", 2}, {"F16", 2},
      {"BF16", 2}, {"U32", 4}, {"I32", 4}, {"F32", 4},     {"U64", 8},     {"I64", 8}, {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 1 : it->second;
}

SafetensorsBuilder& SafetensorsBuilder::add(TensorSpec spec) {
  if (spec.element_size == 0) spec.element_size = element_size_of(spec.dtype);
  specs_.push_back(std::move(spec));
  return *this;
}

SafetensorsBuilder& SafetensorsBuilder::metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
  return *this;
}

SafetensorsBuilder& SafetensorsBuilder::pad_header_to(std::uint64_t multiple) {
  pad_to_ = multiple;
  return *this;
}

std::pair<std::uint64_t, std::uint64_t> SafetensorsBuilder::offsets(std::size_t i) const {
  std::uint64_t at = 0;
  for (std::size_t k = 0;; ++k) {
    std::uint64_t n = specs_[k].element_size;
    for (std::uint64_t d : specs_[k].shape) n *= d;
    if (k == i) return {at, at + n};
    at += n;
  }
}

std::string SafetensorsBuilder::json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!metadata_.empty()) j["__metadata__"] = metadata_;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    auto [begin, end] = offsets(i);
    j[specs_[i].name] = {{"dtype", specs_[i].dtype}, {"shape", specs_[i].shape}, {"data_offsets", {begin, end}}};
  }
  std::string text = j.dump();
  if (pad_to_ > 1) text.append((pad_to_ - (8 + text.size()) % pad_to_) % pad_to_, ' ');
  return text;
}

std::vector<std::uint8_t> SafetensorsBuilder::tensor_bytes(std::size_t i) const {
  auto [begin, end] = offsets(i);
  return pattern(1000003 * (i + 1) + begin, end - begin);
}

std::vector<std::uint8_t> SafetensorsBuilder::data() const {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    auto bytes = tensor_bytes(i);
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

std::vector<std::uint8_t> SafetensorsBuilder::bytes() const { return safetensors_bytes(json(), data()); }

std::string SafetensorsBuilder::write(const std::filesystem::path& path) const { return write_bytes(path, bytes()); }

std::vector<std::uint8_t> safetensors_bytes(const std::string& json, const std::vector<std::uint8_t>& data,
                                            std::int64_t length_override) {
  std::uint64_t n = length_override >= 0 ? static_cast<std::uint64_t>(length_override) : json.size();
  std::vector<std::uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  out.insert(out.end(), json.begin(), json.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

}  // namespace ferry::testing
