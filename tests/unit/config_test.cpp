#include "ferry/config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/process_limits.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

using ::testing::HasSubstr;

namespace ferry {
namespace {

TEST(ParseSize, AcceptsPlainBytesAndSuffixes) {
  EXPECT_EQ(*parse_size("4096", "x"), 4096u);
  EXPECT_EQ(*parse_size("16k", "x"), 16u * 1024);
  EXPECT_EQ(*parse_size("16K", "x"), 16u * 1024);
  EXPECT_EQ(*parse_size("4MiB", "x"), 4u << 20);
  EXPECT_EQ(*parse_size("4mib", "x"), 4u << 20);
  EXPECT_EQ(*parse_size("1GB", "x"), 1000000000u);
  EXPECT_EQ(*parse_size("1G", "x"), 1u << 30);
  EXPECT_EQ(*parse_size("2 TiB", "x"), 2ull << 40);
  EXPECT_EQ(*parse_size(" 7 ", "x"), 7u);
  EXPECT_EQ(*parse_size("0", "x"), 0u);
}

TEST(ParseSize, RejectsWhatItCannotParseNamingTheSetting) {
  for (const char* bad : {"", "abc", "-1", "1.5MiB", "4XB", "MiB", "99999999999999999999", "17179869184GiB"}) {
    auto r = parse_size(bad, "FERRY_TASK_SIZE");
    ASSERT_THAT(r, StatusIs(ErrorCode::invalid_argument)) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("FERRY_TASK_SIZE"));
  }
}

TEST(FormatSize, UsesBinaryUnits) {
  EXPECT_EQ(format_size(512), "512 B");
  EXPECT_EQ(format_size(4u << 20), "4.00 MiB");
  EXPECT_EQ(format_size(1u << 30), "1.00 GiB");
}

TEST(Config, HasDocumentedDefaults) {
  Config c;
  EXPECT_EQ(c.task_size(), 4u << 20);
  EXPECT_EQ(c.gds_threshold(), 16u * 1024);
  EXPECT_EQ(c.compat_mode(), CompatMode::automatic);
  EXPECT_EQ(c.direct_io(), DirectIo::automatic);
  EXPECT_EQ(c.require(), Requirement::none);
  EXPECT_GE(c.threads(), 4u);
  EXPECT_LE(c.threads(), 16u);
  EXPECT_EQ(c.bounce_buffers_per_thread(), 2u);
  EXPECT_EQ(c.source("task_size"), SettingSource::default_value);
}

TEST(Config, ReadsEveryEnvironmentVariable) {
  testing::ScopedEnv a("FERRY_THREADS", "3");
  testing::ScopedEnv b("FERRY_TASK_SIZE", "1MiB");
  testing::ScopedEnv c("FERRY_DIRECT_IO", "off");
  testing::ScopedEnv d("FERRY_COMPAT_MODE", "ON");
  testing::ScopedEnv e("FERRY_GDS_THRESHOLD", "64k");
  testing::ScopedEnv f("FERRY_BOUNCE_BUFFER_SIZE", "8MiB");
  testing::ScopedEnv g("FERRY_BOUNCE_BUFFERS_PER_THREAD", "3");
  testing::ScopedEnv h("FERRY_REQUIRE", "gds");
  auto c1 = Config::from_environment();
  ASSERT_TRUE(c1.ok()) << c1.status().to_string();
  EXPECT_EQ(c1->threads(), 3u);
  EXPECT_EQ(c1->task_size(), 1u << 20);
  EXPECT_EQ(c1->direct_io(), DirectIo::off);
  EXPECT_EQ(c1->compat_mode(), CompatMode::on);
  EXPECT_EQ(c1->gds_threshold(), 64u * 1024);
  EXPECT_EQ(c1->bounce_buffer_size(), 8u << 20);
  EXPECT_EQ(c1->bounce_buffers_per_thread(), 3u);
  EXPECT_EQ(c1->require(), Requirement::gds);
  EXPECT_EQ(c1->source("task_size"), SettingSource::environment);
  EXPECT_EQ(c1->get("compat_mode"), "on");
}

TEST(Config, EnvironmentErrorsNameTheVariable) {
  testing::ScopedEnv a("FERRY_TASK_SIZE", "4XB");
  auto c = Config::from_environment();
  ASSERT_THAT(c, StatusIs(ferry::ErrorCode::invalid_argument));
  EXPECT_THAT(c.status().message(), HasSubstr("FERRY_TASK_SIZE"));
  EXPECT_THAT(c.status().message(), HasSubstr("4XB"));
}

TEST(Config, SetByNameValidatesChoices) {
  Config c;
  EXPECT_TRUE(c.set("compat_mode", "off").ok());
  EXPECT_EQ(c.compat_mode(), CompatMode::off);
  EXPECT_EQ(c.source("compat_mode"), SettingSource::api);
  auto bad = c.set("compat_mode", "maybe");
  EXPECT_EQ(bad.code(), ErrorCode::invalid_argument);
  EXPECT_THAT(bad.message(), HasSubstr("auto, on, off"));
  EXPECT_EQ(c.set("no_such_setting", "1").code(), ErrorCode::invalid_argument);
  EXPECT_THAT(c.set("threads", "0"), StatusIs(ferry::ErrorCode::invalid_argument));
  EXPECT_THAT(c.set("task_size", "0"), StatusIs(ferry::ErrorCode::invalid_argument));
}

TEST(Config, TaskSizeIsRoundedToWholePages) {
  Config c;
  c.set_task_size(5000);
  EXPECT_EQ(c.task_size(), 8192u);
  c.set_task_size(1);
  EXPECT_EQ(c.task_size(), 4096u);
}

TEST(Config, EverySettingIsInTheTableWithAnEnvironmentVariable) {
  Config c;
  for (const auto& row : settings_table()) {
    EXPECT_EQ(row.env, "FERRY_" + [&] {
      std::string up = row.name;
      for (char& ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      return up;
    }());
    // Text settings whose default is "look it up" (s3_region, ...) are empty by default; the others never.
    EXPECT_EQ(c.get(row.name).empty(), row.default_text.empty()) << row.name;
    EXPECT_TRUE(c.set(row.name, c.get(row.name)).ok()) << row.name;
  }
}

// Each default is written twice, in the table (for docs/settings.md and --help) and in Config's members: the
// table's text, parsed, must give the built-in value. Defaults in words ("CPUs, clamped to 4..16") are not
// values and say so by not parsing.
TEST(Config, EveryDocumentedDefaultIsTheBuiltInOne) {
  const Config built_in;
  std::size_t checked = 0;
  for (const auto& row : settings_table()) {
    Config c;
    Status s = c.set(row.name, row.default_text);
    if (!s.ok()) {
      EXPECT_THAT(row.default_text, HasSubstr(" ")) << row.name << ": its default is not a value: " << s.to_string();
      continue;
    }
    EXPECT_EQ(c.get(row.name), built_in.get(row.name)) << row.name << " documents \"" << row.default_text << "\"";
    ++checked;
  }
  EXPECT_GE(checked, settings_table().size() - 2) << "only the thread count's and the pinned budget's defaults are in words";
}

TEST(Config, ThreadsAreTheCoresThisProcessMayUseWithinFourToSixteen) {
  EXPECT_EQ(Config().threads(), std::clamp(detail::usable_cores(), 4u, 16u));
}

TEST(Config, PinnedBudgetIsAQuarterOfMemoryWithinItsBounds) {
  const std::uint64_t quarter = detail::usable_memory_bytes() / 4 / 4096 * 4096;
  EXPECT_EQ(Config().pinned_budget(), std::max<std::uint64_t>(quarter, 64ull << 20));
  Config c;
  EXPECT_FALSE(c.set("pinned_budget", "32MiB").ok()) << "below the least a save's two windows need";
  ASSERT_TRUE(c.set("FERRY_PINNED_BUDGET", "100MB").ok());
  EXPECT_EQ(c.pinned_budget(), 100000000ull / 4096 * 4096 + 4096) << "rounded up to 4 KiB";
  EXPECT_EQ(c.set_pinned_budget(1).pinned_budget(), 64ull << 20) << "the setter clamps";
}

}  // namespace
}  // namespace ferry
