// JSON text for names that are not UTF-8 (issue 10: --json aborted with nlohmann's type_error 316).
#include "report/json_text.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ferry/route.hpp"

namespace {

namespace fd = ferry::detail;
using ::testing::HasSubstr;

TEST(JsonText, ValidUtf8StaysAsItIs) {
  EXPECT_EQ(fd::json_quote("plain.bin"), "\"plain.bin\"");
  EXPECT_EQ(fd::json_quote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
}

TEST(JsonText, EscapesWhatJsonRequires) {
  EXPECT_EQ(fd::json_quote("a\"b\\c\n\t\x01"), "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  EXPECT_EQ(fd::json_quote(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
}

TEST(JsonText, EachUndecodableByteBecomesALowSurrogateEscape) {
  // Python: b"bad\xff\xfe.bin".decode("utf-8", "surrogateescape") == "bad\udcff\udcfe.bin"
  EXPECT_EQ(fd::json_quote("bad\xff\xfe.bin"), "\"bad\\udcff\\udcfe.bin\"");
  // A truncated sequence, an overlong form, an encoded surrogate, a code point above U+10FFFF.
  EXPECT_EQ(fd::json_quote("\xe2\x82"), "\"\\udce2\\udc82\"");
  EXPECT_EQ(fd::json_quote("\xc0\xaf"), "\"\\udcc0\\udcaf\"");
  EXPECT_EQ(fd::json_quote("\xed\xa0\x80"), "\"\\udced\\udca0\\udc80\"");
  EXPECT_EQ(fd::json_quote("\xf4\x90\x80\x80"), "\"\\udcf4\\udc90\\udc80\\udc80\"");
  // Valid characters around a bad byte are kept.
  EXPECT_EQ(fd::json_quote("\xc3\xa9\x80\xc3\xa9"), "\"\xc3\xa9\\udc80\xc3\xa9\"");
}

TEST(JsonText, DumpMatchesNlohmannForValidText) {
  nlohmann::json j = {{"b", {1, 2.5, true, nullptr}}, {"a", "x\"y"}, {"c", nlohmann::json::object()},
                      {"d", nlohmann::json::array()}, {"e", {{"k", "v"}}}};
  EXPECT_EQ(fd::json_dump(j), j.dump());
  EXPECT_EQ(fd::json_dump(j, 2), j.dump(2));
}

TEST(JsonText, DumpNeverThrowsOnBytesThatAreNotUtf8) {
  nlohmann::json j;
  j["path"] = "/d/\xff.bin";
  j["list"] = {"ok", "\xfe"};
  j["\xfd"] = 1;
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  EXPECT_EQ(fd::json_dump(j), "{\"list\":[\"ok\",\"\\udcfe\"],\"path\":\"/d/\\udcff.bin\",\"\\udcfd\":1}");
}

TEST(JsonText, ReportJsonCarriesNotesThatAreNotUtf8) {
  ferry::Report r;
  r.count(ferry::Route::host, ferry::Reason::buffer_is_host_memory, "", 4096, 10);
  r.add_note("O_DIRECT refused for \"/d/\xff.bin\"");
  std::string text = r.to_json();
  EXPECT_THAT(text, HasSubstr("\\\"/d/\\udcff.bin\\\""));
  EXPECT_EQ(fd::json_dump(fd::report_json(r)), text);
}

}  // namespace
