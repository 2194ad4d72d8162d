// serialize_header: the header the reference implementation writes, byte for byte (rules in
// include/ferry/safetensors.hpp, "saving").
#include <algorithm>
#include <numeric>
#include <unordered_set>

#include <fmt/format.h>

#include "ferry/safetensors.hpp"
#include "report/json_text.hpp"
#include "safetensors/dtype_order.hpp"
#include "safetensors/text.hpp"

namespace ferry::safetensors {
namespace {

using detail::quoted_text;
using ferry::detail::json_quote;
// What a Rust String holds, and so all the reference can write.
using ferry::detail::valid_utf8;

Status invalid(std::string what) { return Status(ErrorCode::invalid_argument, std::move(what)); }

Result<std::uint64_t> tensor_bytes(const SaveTensor& t) {
  std::uint64_t n = dtype_size(t.dtype);
  for (std::uint64_t d : t.shape) {
    if (d != 0 && n > UINT64_MAX / d) {
      return invalid(fmt::format("tensor {}: its shape of {} is more than 2^64 bytes", quoted_text(t.name),
                                 dtype_name(t.dtype)));
    }
    n *= d;
  }
  return n;
}

}  // namespace

Result<HeaderImage> serialize_header(std::span<const SaveTensor> tensors,
                                     const std::optional<std::map<std::string, std::string>>& metadata) {
  HeaderImage image;
  image.data_begin.resize(tensors.size());
  image.size_bytes.resize(tensors.size());
  std::unordered_set<std::string_view> names;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SaveTensor& t = tensors[i];
    if (!valid_utf8(t.name)) return invalid(fmt::format("the tensor name {} is not valid UTF-8", quoted_text(t.name)));
    if (t.name == "__metadata__") {
      return invalid("a tensor may not be called \"__metadata__\": the format reserves that key for the metadata");
    }
    if (!names.insert(t.name).second) return invalid(fmt::format("tensor {} appears twice", quoted_text(t.name)));
    if (static_cast<std::size_t>(t.dtype) >= kDtypeCount) {
      return invalid(fmt::format("tensor {} has no safetensors dtype", quoted_text(t.name)));
    }
    FERRY_ASSIGN_OR_RETURN(image.size_bytes[i], tensor_bytes(t));
  }
  if (metadata) {
    for (const auto& [key, value] : *metadata) {
      if (!valid_utf8(key) || !valid_utf8(value)) {
        return invalid(fmt::format("the metadata entry {} is not valid UTF-8", quoted_text(key)));
      }
    }
  }

  image.order.resize(tensors.size());
  std::iota(image.order.begin(), image.order.end(), std::size_t{0});
  std::sort(image.order.begin(), image.order.end(), [&](std::size_t a, std::size_t b) {
    unsigned ra = detail::reference_rank(tensors[a].dtype), rb = detail::reference_rank(tensors[b].dtype);
    if (ra != rb) return ra > rb;
    return tensors[a].name < tensors[b].name;  // bytewise, as Rust compares strings
  });

  std::string json = "{";
  if (metadata) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : *metadata) {  // std::map: sorted keys (see the header on the reference's order)
      if (!first) json += ',';
      first = false;
      json += json_quote(key) + ':' + json_quote(value);  // serde_json's escapes, for valid UTF-8
    }
    json += '}';
  }
  std::uint64_t offset = 0;
  for (std::size_t i : image.order) {
    const SaveTensor& t = tensors[i];
    const std::uint64_t n = image.size_bytes[i];
    if (n > UINT64_MAX - offset) return invalid("the tensors hold more than 2^64 bytes together");
    if (json.size() > 1) json += ',';
    json += json_quote(t.name);
    json += fmt::format(":{{\"dtype\":\"{}\",\"shape\":[", dtype_name(t.dtype));
    for (std::size_t d = 0; d < t.shape.size(); ++d) json += fmt::format("{}{}", d ? "," : "", t.shape[d]);
    json += fmt::format("],\"data_offsets\":[{},{}]}}", offset, offset + n);
    image.data_begin[i] = offset;
    offset += n;
  }
  json += '}';
  // The data section starts at a multiple of 8 bytes: the JSON is padded with spaces (8 + N with N % 8 == 0).
  json.append((8 - json.size() % 8) % 8, ' ');
  image.data_bytes = offset;

  const std::uint64_t n = json.size();
  image.bytes.resize(8);
  for (int b = 0; b < 8; ++b) image.bytes[b] = static_cast<char>((n >> (8 * b)) & 0xFF);
  image.bytes += json;
  return image;
}

}  // namespace ferry::safetensors
