// parse_header and parse_file_image: the safetensors header, from JSON text to a validated Header.
// Like json_parse.cpp, text.cpp and dtype.cpp, it needs nothing but Status, fmt and nlohmann_json, so that
// the fuzzer (tests/fuzz/safetensors_header_fuzzer.cpp) builds these files alone.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ferry/safetensors.hpp"
#include "safetensors/header_prefix.hpp"
#include "safetensors/json_parse.hpp"
#include "safetensors/text.hpp"

namespace ferry::safetensors {
namespace {

using nlohmann::json;

using detail::kPrefixBytes;
constexpr const char* kMetadataKey = "__metadata__";

Status invalid(std::string_view source, const std::string& what) {
  return Status(ErrorCode::invalid_argument,
                fmt::format("Invalid safetensors header in \"{}\": {}", source, what), 0, std::string(source));
}

Status invalid_tensor(std::string_view source, std::string_view name, const std::string& what) {
  return invalid(source, fmt::format("tensor {}: {}", detail::quoted_text(name), what));
}

std::string known_dtypes() {
  std::string out;
  for (std::size_t i = 0; i < kDtypeCount; ++i) {
    if (i) out += ", ";
    out += dtype_name(static_cast<Dtype>(i));
  }
  return out;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Result<std::uint64_t> unsigned_field(const json& value, std::string_view source, std::string_view tensor,
                                     std::string_view what) {
  if (!value.is_number_unsigned()) {
    return invalid_tensor(source, tensor,
                          fmt::format("{} must be a non-negative integer below 2^64, not {}", what,
                                      detail::json_excerpt(value)));
  }
  return value.get<std::uint64_t>();
}

// One "name": {"dtype", "shape", "data_offsets"} entry, checked on its own.
Result<TensorInfo> parse_tensor(const std::string& name, const json& entry, std::uint64_t data_bytes,
                                std::string_view source) {
  if (!entry.is_object()) {
    return invalid_tensor(source, name,
                          fmt::format("expected an object with dtype, shape and data_offsets, not {}",
                                      detail::json_excerpt(entry)));
  }
  TensorInfo t;
  t.name = name;

  auto dtype = entry.find("dtype");
  if (dtype == entry.end()) return invalid_tensor(source, name, "no \"dtype\"");
  if (!dtype->is_string()) {
    return invalid_tensor(source, name, fmt::format("\"dtype\" must be a string, not {}", detail::json_excerpt(*dtype)));
  }
  auto known = dtype_from_name(dtype->get_ref<const std::string&>());
  if (!known) {
    return invalid_tensor(source, name,
                          fmt::format("unknown dtype {} (safetensors dtypes: {})",
                                      detail::quoted_text(dtype->get_ref<const std::string&>()), known_dtypes()));
  }
  t.dtype = *known;

  auto shape = entry.find("shape");
  if (shape == entry.end()) return invalid_tensor(source, name, "no \"shape\"");
  if (!shape->is_array()) {
    return invalid_tensor(source, name, fmt::format("\"shape\" must be an array, not {}", detail::json_excerpt(*shape)));
  }
  t.shape.reserve(shape->size());
  for (const json& dim : *shape) {
    FERRY_ASSIGN_OR_RETURN(std::uint64_t n, unsigned_field(dim, source, name, "every dimension of \"shape\""));
    t.shape.push_back(n);
  }

  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end()) return invalid_tensor(source, name, "no \"data_offsets\"");
  if (!offsets->is_array() || offsets->size() != 2) {
    return invalid_tensor(source, name,
                          fmt::format("\"data_offsets\" must be [begin, end], not {}", detail::json_excerpt(*offsets)));
  }
  FERRY_ASSIGN_OR_RETURN(t.data_begin, unsigned_field((*offsets)[0], source, name, "data_offsets' begin"));
  FERRY_ASSIGN_OR_RETURN(t.data_end, unsigned_field((*offsets)[1], source, name, "data_offsets' end"));
  if (t.data_begin > t.data_end) {
    return invalid_tensor(source, name,
                          fmt::format("data_offsets [{}, {}] end before they begin", t.data_begin, t.data_end));
  }

  // Elements times element size, with every multiplication checked: a shape may claim more than 2^64.
  std::uint64_t elements = 1;
  bool overflow = false;
  for (std::uint64_t d : t.shape) overflow = overflow || __builtin_mul_overflow(elements, d, &elements);
  std::uint64_t bytes = 0;
  overflow = overflow || __builtin_mul_overflow(elements, dtype_size(t.dtype), &bytes);
  if (overflow) {
    return invalid_tensor(source, name,
                          fmt::format("shape {} of {} is more than 2^64 bytes", shape_text(t.shape),
                                      dtype_name(t.dtype)));
  }
  if (bytes != t.size_bytes()) {
    return invalid_tensor(source, name,
                          fmt::format("shape {} of {} is {} bytes, but data_offsets [{}, {}] hold {}",
                                      shape_text(t.shape), dtype_name(t.dtype), bytes, t.data_begin, t.data_end,
                                      t.size_bytes()));
  }
  if (t.data_end > data_bytes) {
    return invalid_tensor(source, name,
                          fmt::format("data_offsets [{}, {}] reach past the end of the data section, which holds "
                                      "{} bytes: the file is truncated or the offsets are wrong",
                                      t.data_begin, t.data_end, data_bytes));
  }
  return t;
}

Result<std::map<std::string, std::string>> parse_metadata(const json& value, std::string_view source) {
  std::map<std::string, std::string> out;
  if (value.is_null()) return out;
  if (!value.is_object()) {
    return invalid(source, fmt::format("\"__metadata__\" must be an object of strings, not {}", detail::json_excerpt(value)));
  }
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return invalid(source, fmt::format("\"__metadata__\" must map strings to strings, but {} holds {}",
                                         detail::quoted_text(key), detail::json_excerpt(v)));
    }
    out.emplace(key, v.get<std::string>());
  }
  return out;
}

// The tensors, sorted by offset, must cover the data section exactly: no overlap, no hole, nothing after.
Status check_coverage(const std::vector<TensorInfo>& tensors, std::uint64_t data_bytes, std::string_view source) {
  std::uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : tensors) {
    if (t.data_begin < covered) {
      return invalid_tensor(source, t.name,
                            fmt::format("data_offsets [{}, {}] overlap tensor {} at [{}, {}]", t.data_begin, t.data_end,
                                        detail::quoted_text(previous->name), previous->data_begin, previous->data_end));
    }
    if (t.data_begin > covered) {
      return invalid_tensor(source, t.name,
                            fmt::format("data_offsets [{}, {}] leave bytes [{}, {}) of the data section to no tensor "
                                        "(the format forbids holes)",
                                        t.data_begin, t.data_end, covered, t.data_begin));
    }
    covered = t.data_end;
    previous = &t;
  }
  if (covered != data_bytes) {
    return invalid(source, fmt::format("the tensors cover {} bytes of the data section, but it holds {}: {} bytes at "
                                       "the end belong to no tensor (the format forbids that)",
                                       covered, data_bytes, data_bytes - covered));
  }
  return Status();
}

}  // namespace

Result<Header> parse_header(std::string_view text, std::uint64_t header_bytes, std::uint64_t data_bytes,
                            std::string_view source, const ParseOptions& options) {
  if (text.size() > options.max_header_bytes) {
    return invalid(source, fmt::format("the header is {} bytes, more than the limit of {} bytes", text.size(),
                                       options.max_header_bytes));
  }
  if (header_bytes > UINT64_MAX - kPrefixBytes || data_bytes > UINT64_MAX - kPrefixBytes - header_bytes) {
    return invalid(source, "header and data sizes overflow a 64-bit file offset");
  }
  // The format: the JSON starts with '{' and may be padded at the end with spaces.
  if (text.empty() || text.front() != '{') {
    return invalid(source, fmt::format("the header must start with '{{', not {}", detail::bytes_excerpt(text.substr(0, 16))));
  }
  json root;
  std::string error;
  if (!detail::parse_json_object(text, root, error)) return invalid(source, error);

  Header header;
  header.header_bytes = header_bytes;
  header.data_bytes = data_bytes;
  header.tensors.reserve(root.size());
  for (const auto& [name, entry] : root.items()) {
    if (name == kMetadataKey) {
      FERRY_ASSIGN_OR_RETURN(header.metadata, parse_metadata(entry, source));
      continue;
    }
    FERRY_ASSIGN_OR_RETURN(TensorInfo t, parse_tensor(name, entry, data_bytes, source));
    t.file_offset = kPrefixBytes + header_bytes + t.data_begin;
    header.tensors.push_back(std::move(t));
  }
  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.data_begin != b.data_begin) return a.data_begin < b.data_begin;
    if (a.data_end != b.data_end) return a.data_end < b.data_end;
    return a.name < b.name;
  });
  FERRY_RETURN_IF_ERROR(check_coverage(header.tensors, data_bytes, source));
  return header;
}

std::uint64_t detail::header_length(const unsigned char prefix[8]) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  return n;
}

Status detail::check_header_length(std::uint64_t header_bytes, std::uint64_t file_bytes, std::string_view source,
                                   const ParseOptions& options) {
  if (file_bytes < kPrefixBytes) {
    return invalid(source, fmt::format("the file is {} bytes, too short for the 8-byte header length", file_bytes));
  }
  if (header_bytes > options.max_header_bytes) {
    return invalid(source, fmt::format("the header length is {} bytes, more than the limit of {} bytes "
                                       "(max_header_bytes)",
                                       header_bytes, options.max_header_bytes));
  }
  if (header_bytes > file_bytes - kPrefixBytes) {
    return invalid(source, fmt::format("the header length {} points past the end of the file ({} bytes): the file is "
                                       "truncated or not a safetensors file",
                                       header_bytes, file_bytes));
  }
  return Status();
}

Result<Header> parse_file_image(const void* bytes, std::size_t size, std::string_view source,
                                const ParseOptions& options) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  unsigned char prefix[kPrefixBytes] = {};
  if (size >= kPrefixBytes) std::memcpy(prefix, p, kPrefixBytes);
  const std::uint64_t n = detail::header_length(prefix);
  FERRY_RETURN_IF_ERROR(detail::check_header_length(n, size, source, options));
  std::string_view text(reinterpret_cast<const char*>(p + kPrefixBytes), static_cast<std::size_t>(n));
  return parse_header(text, n, size - kPrefixBytes - n, source, options);
}

const TensorInfo* Header::find(std::string_view name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace ferry::safetensors
