// The safetensors header parser: every dtype and shape class, metadata, padding, and every way a header can
// be wrong, each refused with a message that names the file and (where one is to blame) the tensor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/safetensors.hpp"
#include "safetensors/text.hpp"
#include "support/safetensors_writer.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

using ::testing::AllOf;
using ::testing::HasSubstr;

namespace ferry::safetensors {
namespace {

using testing::SafetensorsBuilder;
using testing::TensorSpec;

constexpr const char* kSource = "/ckpt/model.safetensors";

Result<Header> parse_bytes(const std::vector<std::uint8_t>& bytes, const ParseOptions& options = {}) {
  return parse_file_image(bytes.data(), bytes.size(), kSource, options);
}

// The JSON `json` over `data_bytes` bytes of data.
Result<Header> parse_json(const std::string& json, std::uint64_t data_bytes) {
  return parse_bytes(testing::safetensors_bytes(json, std::vector<std::uint8_t>(data_bytes, 0)));
}

#define EXPECT_INVALID(result, ...)                                                                      \
  do {                                                                                                   \
    auto&& r_ = (result);                                                                                \
    ASSERT_THAT(r_, StatusIs(ErrorCode::invalid_argument)) << r_.status().to_string();                                                                               \
    EXPECT_EQ(r_.status().path(), kSource);                                                              \
    EXPECT_THAT(r_.status().message(), AllOf(HasSubstr("Invalid safetensors header in \"/ckpt/model.safetensors\""), \
                                             __VA_ARGS__));                                              \
  } while (0)

TEST(SafetensorsDtype, NamesSizesAndRoundTrip) {
  const std::pair<const char*, std::uint64_t> expected[] = {
      {"BOOL", 1}, {"U8", 1},      {"U16", 2},     {"U32", 4}, {"U64", 8},  {"I8", 1},  {"I16", 2}, {"I32", 4},
      {"I64", 8},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F16", 2}, {"BF16", 2}, {"F32", 4}, {"F64", 8}};
  ASSERT_EQ(std::size(expected), kDtypeCount);
  for (std::size_t i = 0; i < kDtypeCount; ++i) {
    auto d = static_cast<Dtype>(i);
    EXPECT_STREQ(dtype_name(d), expected[i].first);
    EXPECT_EQ(dtype_size(d), expected[i].second) << expected[i].first;
    EXPECT_EQ(dtype_from_name(expected[i].first), d);
  }
  EXPECT_FALSE(dtype_from_name("bf16"));  // case matters, as in the format
  EXPECT_FALSE(dtype_from_name("C64"));
  EXPECT_FALSE(dtype_from_name(""));
}

TEST(SafetensorsHeader, EveryDtypeAndShapeClass) {
  SafetensorsBuilder b;
  const char* dtypes[] = {"BOOL", "U8", "U16", "U32", "U64", "I8", "I16", "I32",
                          "I64", "F8_E4M3", "F8_E5M2", "F16", "BF16", "F32", "F64"};
  for (const char* d : dtypes) {
    b.add({std::string("t.") + d + ".matrix", d, {3, 5}});
    b.add({std::string("t.") + d + ".scalar", d, {}});        // 0-d: one element
    b.add({std::string("t.") + d + ".empty", d, {0, 7}});     // no elements
    b.add({std::string("t.") + d + ".rank4", d, {2, 1, 3, 2}});
  }
  auto bytes = b.bytes();
  auto r = parse_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), b.specs().size());
  EXPECT_EQ(r->header_bytes, b.json().size());
  EXPECT_EQ(r->data_bytes, b.data().size());
  EXPECT_EQ(r->data_offset(), 8 + b.json().size());
  for (std::size_t i = 0; i < b.specs().size(); ++i) {
    const TensorSpec& s = b.specs()[i];
    const TensorInfo* t = r->find(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_STREQ(dtype_name(t->dtype), s.dtype.c_str());
    EXPECT_EQ(t->shape, s.shape);
    auto [begin, end] = b.offsets(i);
    EXPECT_EQ(t->data_begin, begin);
    EXPECT_EQ(t->data_end, end);
    EXPECT_EQ(t->file_offset, r->data_offset() + begin);
    EXPECT_EQ(t->shard, 0u);
    std::uint64_t elements = 1;
    for (auto d : s.shape) elements *= d;
    EXPECT_EQ(t->element_count(), elements);
    EXPECT_EQ(t->size_bytes(), elements * s.element_size);
  }
  // Sorted by offset; the empty tensors sit between their neighbours.
  for (std::size_t i = 1; i < r->tensors.size(); ++i) {
    EXPECT_LE(r->tensors[i - 1].data_end, r->tensors[i].data_begin);
  }
}

TEST(SafetensorsHeader, MetadataAndPadding) {
  SafetensorsBuilder b;
  b.metadata("format", "pt").metadata("note", "héllo \"quoted\"").pad_header_to(64);
  b.add({"w", "F32", {2, 2}});
  auto r = parse_bytes(b.bytes());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->metadata.size(), 2u);
  EXPECT_EQ(r->metadata.at("format"), "pt");
  EXPECT_EQ(r->metadata.at("note"), "héllo \"quoted\"");
  EXPECT_EQ(r->data_offset() % 64, 0u);  // the header was padded with spaces
  EXPECT_EQ(r->tensors.front().file_offset % 64, 0u);
}

TEST(SafetensorsHeader, EmptyCheckpointsAndNullMetadata) {
  auto r = parse_json("{}", 0);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->tensors.empty());
  EXPECT_EQ(r->data_bytes, 0u);
  auto m = parse_json(R"({"__metadata__": null})", 0);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_TRUE(m->metadata.empty());
  // Only empty tensors: several may share one offset.
  auto e = parse_json(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
                          "b": {"dtype": "I8", "shape": [4, 0], "data_offsets": [0, 0]}})",
                      0);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->tensors.size(), 2u);
}

TEST(SafetensorsHeader, UnknownFieldsInATensorEntryAreIgnored) {
  auto r = parse_json(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2], "extra": [1, 2]}})", 2);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
}

TEST(SafetensorsHeader, FileTooShortForTheLength) {
  std::vector<std::uint8_t> five(5, 0);
  EXPECT_INVALID(parse_bytes(five), HasSubstr("the file is 5 bytes, too short for the 8-byte header length"));
  EXPECT_INVALID(parse_bytes({}), HasSubstr("the file is 0 bytes"));
}

TEST(SafetensorsHeader, HeaderLengthPastTheEnd) {
  auto bytes = testing::safetensors_bytes("{}", {}, 1000);
  EXPECT_INVALID(parse_bytes(bytes), HasSubstr("the header length 1000 points past the end of the file (10 bytes)"));
  auto huge = testing::safetensors_bytes("{}", {}, std::int64_t{1} << 62);
  EXPECT_INVALID(parse_bytes(huge), HasSubstr("more than the limit of 100000000 bytes"));
}

TEST(SafetensorsHeader, HugeHeaderIsRefusedBeforeParsing) {
  SafetensorsBuilder b;
  b.add({"w", "U8", {4}});
  ParseOptions small;
  small.max_header_bytes = 16;
  EXPECT_INVALID(parse_bytes(b.bytes(), small), HasSubstr("more than the limit of 16 bytes"));
  EXPECT_INVALID(parse_header(std::string(17, ' '), 17, 0, kSource, small), HasSubstr("the header is 17 bytes"));
}

TEST(SafetensorsHeader, InvalidJson) {
  EXPECT_INVALID(parse_json(R"({"a": )", 0), HasSubstr("not valid JSON"));
  EXPECT_INVALID(parse_json("{\"a\": 1,}", 0), HasSubstr("not valid JSON"));
  EXPECT_INVALID(parse_json("{} trailing", 0), HasSubstr("not valid JSON"));
  EXPECT_INVALID(parse_json("[1, 2]", 0), HasSubstr("must start with '{'"));
  EXPECT_INVALID(parse_json("  {}", 0), HasSubstr("must start with '{'"));
  std::string bad_utf8 = "{\"a\xff\": 1}";
  auto r = parse_json(bad_utf8, 0);
  EXPECT_INVALID(r, HasSubstr("not valid JSON"));
}

TEST(SafetensorsHeader, DuplicateKeysAreRefused) {
  EXPECT_INVALID(parse_json(R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                                "a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})",
                            1),
                 HasSubstr("the key \"a\" appears twice in one object"));
  EXPECT_INVALID(parse_json(R"({"a": {"dtype": "U8", "dtype": "I8", "shape": [1], "data_offsets": [0, 1]}})", 1),
                 HasSubstr("the key \"dtype\" appears twice"));
}

TEST(SafetensorsHeader, MalformedTensorEntriesNameTheTensor) {
  struct Case {
    const char* json;
    const char* want;
  } cases[] = {
      {R"({"w": 5})", "tensor \"w\": expected an object with dtype, shape and data_offsets, not 5"},
      {R"({"w": {"shape": [1], "data_offsets": [0, 1]}})", "tensor \"w\": no \"dtype\""},
      {R"({"w": {"dtype": 3, "shape": [1], "data_offsets": [0, 1]}})", "tensor \"w\": \"dtype\" must be a string"},
      {R"({"w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 1]}})",
       "tensor \"w\": unknown dtype \"F33\" (safetensors dtypes: BOOL, U8"},
      {R"({"w": {"dtype": "U8", "data_offsets": [0, 1]}})", "tensor \"w\": no \"shape\""},
      {R"({"w": {"dtype": "U8", "shape": 1, "data_offsets": [0, 1]}})", "\"shape\" must be an array, not 1"},
      {R"({"w": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}})",
       "every dimension of \"shape\" must be a non-negative integer below 2^64, not -1"},
      {R"({"w": {"dtype": "U8", "shape": [1.0], "data_offsets": [0, 1]}})", "not 1.0"},
      {R"({"w": {"dtype": "U8", "shape": [18446744073709551616], "data_offsets": [0, 1]}})",
       "must be a non-negative integer below 2^64"},
      {R"({"w": {"dtype": "U8", "shape": ["1"], "data_offsets": [0, 1]}})", "not \"1\""},
      {R"({"w": {"dtype": "U8", "shape": [1]}})", "tensor \"w\": no \"data_offsets\""},
      {R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})", "\"data_offsets\" must be [begin, end]"},
      {R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}})", "\"data_offsets\" must be [begin, end]"},
      {R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 0]}})", "data_offsets [1, 0] end before they begin"},
      {R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}})", "data_offsets' begin must be"},
  };
  for (const Case& c : cases) {
    EXPECT_INVALID(parse_json(c.json, 1), HasSubstr(c.want));
  }
}

TEST(SafetensorsHeader, SpanMustMatchDtypeTimesShape) {
  EXPECT_INVALID(parse_json(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 20),
                 HasSubstr("tensor \"w\": shape [2, 3] of F32 is 24 bytes, but data_offsets [0, 20] hold 20"));
  EXPECT_INVALID(parse_json(R"({"w": {"dtype": "BF16", "shape": [], "data_offsets": [0, 4]}})", 4),
                 HasSubstr("shape [] of BF16 is 2 bytes"));
}

TEST(SafetensorsHeader, ShapesBeyond64BitsOverflowCleanly) {
  EXPECT_INVALID(
      parse_json(R"({"w": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0),
      HasSubstr("shape [4294967296, 4294967296] of F64 is more than 2^64 bytes"));
  // 2^61 elements of 8 bytes: the element count fits, the byte count does not.
  EXPECT_INVALID(parse_json(R"({"w": {"dtype": "F64", "shape": [2305843009213693952], "data_offsets": [0, 0]}})", 0),
                 HasSubstr("more than 2^64 bytes"));
  // A zero dimension makes any product zero, however large the others.
  auto ok = parse_json(R"({"w": {"dtype": "F64", "shape": [0, 18446744073709551615], "data_offsets": [0, 0]}})", 0);
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
}

TEST(SafetensorsHeader, OffsetsOutOfRangeMeanATruncatedFile) {
  SafetensorsBuilder b;
  b.add({"a", "U8", {8}}).add({"b", "F32", {4}});
  auto bytes = b.bytes();
  bytes.resize(bytes.size() - 3);  // the last tensor lost 3 bytes
  EXPECT_INVALID(parse_bytes(bytes), HasSubstr("tensor \"b\": data_offsets [8, 24] reach past the end of the data "
                                               "section, which holds 21 bytes: the file is truncated"));
}

TEST(SafetensorsHeader, OverlapsHolesAndTrailingBytes) {
  EXPECT_INVALID(parse_json(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
                            6),
                 HasSubstr("tensor \"b\": data_offsets [2, 6] overlap tensor \"a\" at [0, 4]"));
  EXPECT_INVALID(parse_json(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                "b": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})",
                            4),
                 HasSubstr("overlap"));
  EXPECT_INVALID(parse_json(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                "b": {"dtype": "U8", "shape": [4], "data_offsets": [6, 10]}})",
                            10),
                 HasSubstr("tensor \"b\": data_offsets [6, 10] leave bytes [4, 6) of the data section to no tensor"));
  EXPECT_INVALID(parse_json(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})", 6),
                 HasSubstr("leave bytes [0, 2)"));
  EXPECT_INVALID(parse_json(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", 9),
                 HasSubstr("the tensors cover 4 bytes of the data section, but it holds 9"));
  EXPECT_INVALID(parse_json("{}", 3), HasSubstr("the tensors cover 0 bytes"));
}

TEST(SafetensorsHeader, MetadataMustMapStringsToStrings) {
  EXPECT_INVALID(parse_json(R"({"__metadata__": {"n": 1}})", 0),
                 HasSubstr("\"__metadata__\" must map strings to strings, but \"n\" holds 1"));
  EXPECT_INVALID(parse_json(R"({"__metadata__": ["x"]})", 0), HasSubstr("\"__metadata__\" must be an object"));
}

TEST(SafetensorsHeader, HostileNamesAreQuotedSafely) {
  std::string name(500, 'x');
  name[3] = '\n';
  std::string json = "{\"" + std::string(name).replace(3, 1, "\\n") +
                     R"(": {"dtype": "Q", "shape": [1], "data_offsets": [0, 1]}})";
  auto r = parse_json(json, 1);
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::invalid_argument));
  EXPECT_THAT(r.status().message(), HasSubstr("tensor \"xxx\\x0axxx"));
  EXPECT_THAT(r.status().message(), HasSubstr("...\""));
  EXPECT_LT(r.status().message().size(), 700u);
  // A cut never splits a UTF-8 character.
  std::string wide;
  for (int i = 0; i < 150; ++i) wide += "\xc3\xa9";  // é
  std::string q = detail::quoted_text(wide);
  EXPECT_EQ(q.substr(q.size() - 4), "...\"");
  std::string body = q.substr(1, q.size() - 5);
  EXPECT_EQ(body.size() % 2, 0u);
}

}  // namespace
}  // namespace ferry::safetensors
