// Every numeric setting has bounds (issue 10: task sizes near 2^64 wrapped to 4096, FERRY_THREADS=1024 was
// taken as it was, and a bad FERRY_REQUIRE listed "none, , gds").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ferry/config.hpp"

namespace {

using ::testing::HasSubstr;
using ferry::Config;
using ferry::ErrorCode;

// A rejected value names the setting (or variable), the value and the bounds.
void expect_rejected(const char* name, const char* value, const char* bounds) {
  Config c;
  ferry::Status s = c.set(name, value, ferry::SettingSource::environment);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument) << name << "=" << value;
  EXPECT_THAT(s.message(), HasSubstr(name));
  EXPECT_THAT(s.message(), HasSubstr(std::string("\"") + value + "\""));
  EXPECT_THAT(s.message(), HasSubstr(bounds));
}

TEST(ConfigBounds, RejectsNumbersOutsideTheirBoundsNamingThem) {
  expect_rejected("FERRY_THREADS", "1024", "from 1 to 256");
  expect_rejected("FERRY_THREADS", "0", "from 1 to 256");
  expect_rejected("FERRY_THREADS", "4k", "from 1 to 256");
  expect_rejected("FERRY_TASK_SIZE", "18446744073709551615", "from 1 byte to 1.00 GiB");
  expect_rejected("FERRY_TASK_SIZE", "16TiB", "from 1 byte to 1.00 GiB");
  expect_rejected("FERRY_TASK_SIZE", "0", "from 1 byte to 1.00 GiB");
  expect_rejected("FERRY_TASK_SIZE", "99999999999999999999", "from 1 byte to 1.00 GiB");  // above 2^64
  expect_rejected("FERRY_GDS_THRESHOLD", "2TiB", "from 0 to 1.00 TiB");
  expect_rejected("FERRY_BOUNCE_BUFFER_SIZE", "1GiB", "from 1 byte to 256.00 MiB");
  expect_rejected("FERRY_BOUNCE_BUFFERS_PER_THREAD", "1", "from 2 to 64");
  expect_rejected("FERRY_BOUNCE_BUFFERS_PER_THREAD", "65", "from 2 to 64");
}

TEST(ConfigBounds, AcceptsTheBoundsThemselves) {
  Config c;
  EXPECT_TRUE(c.set("threads", "256").ok());
  EXPECT_EQ(c.threads(), 256u);
  EXPECT_TRUE(c.set("task_size", "1GiB").ok());
  EXPECT_EQ(c.task_size(), 1u << 30);
  EXPECT_TRUE(c.set("task_size", "1").ok());
  EXPECT_EQ(c.task_size(), 4096u);
  EXPECT_TRUE(c.set("gds_threshold", "0").ok());
  EXPECT_TRUE(c.set("bounce_buffer_size", "256MiB").ok());
  EXPECT_EQ(c.bounce_buffer_size(), 256u << 20);
}

TEST(ConfigBounds, SettersClampInsteadOfWrapping) {
  Config c;
  c.set_task_size(UINT64_MAX - 100);
  EXPECT_EQ(c.task_size(), 1u << 30);
  c.set_bounce_buffer_size(UINT64_MAX);
  EXPECT_EQ(c.bounce_buffer_size(), 256u << 20);
  c.set_threads(1024);
  EXPECT_EQ(c.threads(), 256u);
  c.set_gds_threshold(UINT64_MAX);
  EXPECT_EQ(c.gds_threshold(), 1ull << 40);
}

TEST(ConfigBounds, BadRequireListsTheChoicesWithoutAnEmptyOne) {
  Config c;
  ferry::Status s = c.set("FERRY_REQUIRE", "always", ferry::SettingSource::environment);
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_THAT(s.message(), HasSubstr("FERRY_REQUIRE: cannot use \"always\" (expected one of none, gds)"));
  EXPECT_TRUE(c.set("require", "").ok());  // empty still means none
  EXPECT_EQ(c.require(), ferry::Requirement::none);
}

}  // namespace
