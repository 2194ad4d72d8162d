// The safetensors element types: names as the format spells them, and sizes.
#include "ferry/safetensors.hpp"

#include <array>

#include "safetensors/dtype_order.hpp"

namespace ferry::safetensors {
namespace {

struct DtypeRow {
  Dtype dtype;
  const char* name;
  std::uint64_t size;
  // The position in the reference implementation's Dtype enum, which it documents as "in increasing
  // alignment order"; its writer sorts tensors by it, descending.
  unsigned reference_rank;
};

// In enum order, so that a Dtype indexes its row.
constexpr std::array<DtypeRow, kDtypeCount> kDtypes{{
    {Dtype::boolean, "BOOL", 1, 0},
    {Dtype::u8, "U8", 1, 1},
    {Dtype::u16, "U16", 2, 6},
    {Dtype::u32, "U32", 4, 10},
    {Dtype::u64, "U64", 8, 14},
    {Dtype::i8, "I8", 1, 2},
    {Dtype::i16, "I16", 2, 5},
    {Dtype::i32, "I32", 4, 9},
    {Dtype::i64, "I64", 8, 13},
    {Dtype::f8_e4m3, "F8_E4M3", 1, 4},
    {Dtype::f8_e5m2, "F8_E5M2", 1, 3},
    {Dtype::f16, "F16", 2, 7},
    {Dtype::bf16, "BF16", 2, 8},
    {Dtype::f32, "F32", 4, 11},
    {Dtype::f64, "F64", 8, 12},
}};

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < kDtypes.size(); ++i) {
    if (static_cast<std::size_t>(kDtypes[i].dtype) != i) return false;
  }
  return true;
}
static_assert(rows_in_enum_order());

}  // namespace

const char* dtype_name(Dtype d) noexcept {
  auto i = static_cast<std::size_t>(d);
  return i < kDtypes.size() ? kDtypes[i].name : "?";
}

std::optional<Dtype> dtype_from_name(std::string_view name) noexcept {
  for (const DtypeRow& row : kDtypes) {
    if (name == row.name) return row.dtype;
  }
  return std::nullopt;
}

std::uint64_t dtype_size(Dtype d) noexcept {
  auto i = static_cast<std::size_t>(d);
  return i < kDtypes.size() ? kDtypes[i].size : 1;
}

namespace detail {
unsigned reference_rank(Dtype d) noexcept {
  auto i = static_cast<std::size_t>(d);
  return i < kDtypes.size() ? kDtypes[i].reference_rank : 0;
}
}  // namespace detail

std::uint64_t TensorInfo::element_count() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

}  // namespace ferry::safetensors
