// cufile.json: comment stripping, keys, defaults, errors with positions, and which file is in effect.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "platform/probes/cufile_config.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace fs = std::filesystem;
using namespace ferry::detail::probes;

namespace {
fs::path fixture(const char* scenario) { return fs::path(FERRY_TEST_FIXTURES) / "doctor" / scenario; }
}  // namespace

TEST(CuFileConfig, StripsCommentsButNotStrings) {
  std::string in =
      "{ // comment \"with quotes\"\n"
      "  \"dir\": \"/a//b\", /* block\n still */ \"x\": \"esc \\\" // kept\"\n}";
  std::string out = strip_json_comments(in);
  EXPECT_EQ(out.size(), in.size());  // offsets stay valid for error positions
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), std::count(in.begin(), in.end(), '\n'));
  EXPECT_EQ(out.find("comment"), std::string::npos);
  EXPECT_EQ(out.find("block"), std::string::npos);
  EXPECT_EQ(out.find("still"), std::string::npos);
  EXPECT_NE(out.find("\"/a//b\""), std::string::npos);
  EXPECT_NE(out.find("\"esc \\\" // kept\""), std::string::npos);
}

TEST(CuFileConfig, ParsesTheKeysWeReport) {
  auto r = probe_cufile_config(fixture("baremetal_gds"), std::string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& c = *r;
  EXPECT_TRUE(c.file_found);
  EXPECT_EQ(c.path, "/etc/cufile.json");
  EXPECT_EQ(c.path_source, "default path");
  EXPECT_TRUE(c.allow_compat_mode.value);
  EXPECT_FALSE(c.allow_compat_mode.is_default);
  EXPECT_TRUE(c.use_pci_p2pdma.value);
  EXPECT_EQ(c.max_direct_io_size_kb.value, 8192u);
  EXPECT_EQ(c.posix_pool_slab_size_kb.value, (std::vector<std::uint64_t>{4, 1024, 16384}));
  EXPECT_FALSE(c.posix_pool_slab_size_kb.is_default);
  EXPECT_EQ(c.posix_pool_slab_count.value, (std::vector<std::uint64_t>{256, 32, 16}));
  EXPECT_EQ(c.cufile_stats.value, 3);
  EXPECT_EQ(c.logging_dir.value, "/var/log/cufile//nested");
  EXPECT_EQ(c.logging_level.value, "INFO");
  EXPECT_TRUE(c.warnings.empty());
}

TEST(CuFileConfig, MissingKeysTakeDocumentedDefaults) {
  auto r = parse_cufile_config("{ \"properties\": {} }", "/x/cufile.json");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->allow_compat_mode.is_default);
  EXPECT_FALSE(r->allow_compat_mode.value);
  EXPECT_TRUE(r->use_pci_p2pdma.is_default);
  EXPECT_EQ(r->max_direct_io_size_kb.value, 16384u);
  EXPECT_TRUE(r->max_direct_io_size_kb.is_default);
  EXPECT_EQ(r->posix_pool_slab_count.value, (std::vector<std::uint64_t>{128, 64, 64}));
  EXPECT_EQ(r->cufile_stats.value, 0);
  EXPECT_EQ(r->logging_level.value, "ERROR");
  EXPECT_TRUE(r->logging_dir.is_default);
  EXPECT_EQ(r->max_direct_io_size_kb.key, "properties.max_direct_io_size_kb");
}

TEST(CuFileConfig, WrongTypesWarnAndKeepDefaults) {
  auto r = parse_cufile_config(
      R"({"properties": {"allow_compat_mode": "yes", "max_direct_io_size_kb": -1, "posix_pool_slab_count": [1, "x"],
          "posix_pool_slab_size_kb": 4096}})",
      "c.json");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->allow_compat_mode.is_default);
  EXPECT_TRUE(r->max_direct_io_size_kb.is_default);
  EXPECT_TRUE(r->posix_pool_slab_count.is_default);
  // A single number is a one-element slab list.
  EXPECT_EQ(r->posix_pool_slab_size_kb.value, (std::vector<std::uint64_t>{4096}));
  ASSERT_EQ(r->warnings.size(), 4u);  // three wrong types, and 1 size vs 3 counts
  EXPECT_EQ(r->warnings[0],
            "properties.allow_compat_mode: expected a boolean, found \"yes\"; cuFile's default applies");
}

TEST(CuFileConfig, ReportsParseErrorsWithFileAndPosition) {
  auto r = parse_cufile_config("{\n  // fine\n  \"a\": 1,,\n}", "/etc/cufile.json");
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::invalid_argument));
  EXPECT_EQ(r.status().message().rfind("/etc/cufile.json:3:10: parse error", 0), 0u) << r.status().message();
  EXPECT_EQ(r.status().path(), "/etc/cufile.json");
}

TEST(CuFileConfig, UnterminatedCommentOrStringIsAnError) {
  EXPECT_THAT(parse_cufile_config("{ \"a\": 1 /* never closed", "c.json"), StatusIs(ferry::ErrorCode::invalid_argument));
  EXPECT_THAT(parse_cufile_config("{ \"a\": \"never closed }", "c.json"), StatusIs(ferry::ErrorCode::invalid_argument));
}

TEST(CuFileConfig, TopLevelMustBeAnObject) {
  auto r = parse_cufile_config("[1, 2]", "c.json");
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::invalid_argument));
  EXPECT_NE(r.status().message().find("not a JSON object"), std::string::npos);
}

TEST(CuFileConfig, MissingFileGivesFlaggedDefaults) {
  auto r = probe_cufile_config(fixture("vm_no_udev_record"), std::string());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->file_found);
  EXPECT_EQ(r->path, "/etc/cufile.json");
  EXPECT_TRUE(r->allow_compat_mode.is_default);
  EXPECT_NE(r->evidence.at(0).find("absent"), std::string::npos);
}

TEST(CuFileConfig, EnvironmentVariableChoosesTheFile) {
  auto r = probe_cufile_config(fixture("baremetal_gds"), std::string("/opt/custom/cufile.json"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->path, "/opt/custom/cufile.json");
  EXPECT_EQ(r->path_source, "CUFILE_ENV_PATH_JSON");
  EXPECT_FALSE(r->allow_compat_mode.value);
  EXPECT_FALSE(r->allow_compat_mode.is_default);
  EXPECT_TRUE(r->use_pci_p2pdma.is_default);

  ferry::testing::ScopedEnv env("CUFILE_ENV_PATH_JSON", "/opt/custom/cufile.json");
  auto from_env = probe_cufile_config(fixture("baremetal_gds"));
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->path, "/opt/custom/cufile.json");
  EXPECT_EQ(cufile_config_path(nullptr), "/etc/cufile.json");
  EXPECT_EQ(cufile_config_path(""), "/etc/cufile.json");
}
