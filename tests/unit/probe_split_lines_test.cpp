// split_lines (platform/probes/probe_fs.hpp): the lines the probes parse, and where a trailing '\n' leaves them.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "platform/probes/probe_fs.hpp"

using ferry::detail::probes::split_lines;
using Lines = std::vector<std::string_view>;

TEST(SplitLines, AFinalNewlineStartsNoEmptyLine) {
  EXPECT_EQ(split_lines("a\nb\n"), (Lines{"a", "b"}));
  EXPECT_EQ(split_lines("a\nb"), (Lines{"a", "b"}));
}

TEST(SplitLines, EmptyTextHasNoLines) { EXPECT_TRUE(split_lines("").empty()); }

TEST(SplitLines, EmptyLinesInsideAreKept) {
  EXPECT_EQ(split_lines("\n\nc\n"), (Lines{"", "", "c"}));
  EXPECT_EQ(split_lines("\n"), (Lines{""}));
}

TEST(SplitLines, CarriageReturnsStayForTheCallerToHandle) {
  EXPECT_EQ(split_lines("E:A=1\r\nE:B=2\r\n"), (Lines{"E:A=1\r", "E:B=2\r"}));
}
