// NVTX ranges (Config::nvtx, FERRY_NVTX): loaded through the NVTX v3 injection protocol from a stand-in
// tool (tests/nvtx_tool/fake_nvtx_tool.cpp), which records what Ferry sent it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <sstream>
#include <vector>

#include "ferry/file.hpp"
#include "platform/nvtx/nvtx.hpp"
#include "support/test_files.hpp"

using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace ferry {
namespace {

class Nvtx : public ::testing::Test {
 protected:
  void SetUp() override {
    detail::nvtx::reload_for_testing(FERRY_FAKE_NVTX_TOOL);
    ASSERT_TRUE(detail::nvtx::attached()) << detail::nvtx::status();
    handle_ = dlopen(FERRY_FAKE_NVTX_TOOL, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    ASSERT_NE(handle_, nullptr) << dlerror();
    events_fn_ = reinterpret_cast<int (*)(char*, int)>(dlsym(handle_, "fake_nvtx_tool_events"));
    ASSERT_NE(events_fn_, nullptr);
    (void)events();  // start from an empty record
    path_ = testing::write_pattern_file(testing::test_dir() / "data.bin", 3 * 4096);
  }
  void TearDown() override {
    if (handle_) dlclose(handle_);
    detail::nvtx::reload_for_testing(nullptr);
  }

  std::vector<std::string> events() {
    std::vector<char> text(1 << 16);
    events_fn_(text.data(), static_cast<int>(text.size()));
    std::vector<std::string> lines;
    std::istringstream in(text.data());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  void* handle_ = nullptr;
  int (*events_fn_)(char*, int) = nullptr;
  std::string path_;
};

TEST_F(Nvtx, RangesAroundTheRequestAndEachTaskWhenOn) {
  Config c;
  c.set_nvtx(true).set_task_size(4096).set_threads(2);
  auto f = File::open(path_, "r", c);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<char> buf(3 * 4096);
  auto r = f->pread(buf.data(), buf.size(), 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto lines = events();
  ASSERT_FALSE(lines.empty());
  // "start <id> <message>" first, "end <id>" last, with the id the tool gave.
  ASSERT_THAT(lines.front(), StartsWith("start "));
  std::string id = lines.front().substr(6, lines.front().find(' ', 6) - 6);
  EXPECT_THAT(lines.front(), StartsWith("start " + id + " ferry read 12.00 KiB at offset 0 from \""));
  // Each worker (one or two: a worker that finds the next task waiting takes it too) adds a set-up and a
  // finish range around its tasks; the request's range ends after its last task's.
  int tasks = 0, setups = 0, finishes = 0, pops = 0;
  std::size_t last_task = 0, end = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind("push ferry task ", 0) == 0) {
      ++tasks;
      last_task = i;
      EXPECT_THAT(l, HasSubstr("ferry task host 4096 bytes at offset"));
    }
    if (l == "push ferry worker set-up") ++setups;
    if (l == "push ferry worker finish") ++finishes;
    if (l == "pop") ++pops;
    if (l == "end " + id) end = i;
  }
  EXPECT_EQ(tasks, 3);
  EXPECT_GE(setups, 1);
  EXPECT_LE(setups, 2);
  EXPECT_EQ(finishes, setups);
  EXPECT_EQ(pops, 3 + 2 * setups);
  EXPECT_GT(end, last_task) << "the request's range ended before its last task";
}

TEST_F(Nvtx, NothingWhenOff) {
  Config c;  // nvtx off by default
  EXPECT_FALSE(c.nvtx());
  auto f = File::open(path_, "r", c);
  ASSERT_TRUE(f.ok());
  std::vector<char> buf(4096);
  ASSERT_TRUE(f->pread(buf.data(), buf.size(), 0).get().ok());
  EXPECT_TRUE(events().empty());
}

TEST_F(Nvtx, SettingParsesFromTheEnvironmentSpelling) {
  Config c;
  ASSERT_TRUE(c.set("FERRY_NVTX", "on", SettingSource::environment).ok());
  EXPECT_TRUE(c.nvtx());
  EXPECT_EQ(c.get("nvtx"), "on");
  ASSERT_TRUE(c.set("nvtx", "0").ok());
  EXPECT_FALSE(c.nvtx());
  Status bad = c.set("FERRY_NVTX", "maybe", SettingSource::environment);
  EXPECT_EQ(bad.code(), ErrorCode::invalid_argument);
  EXPECT_THAT(bad.message(), HasSubstr("FERRY_NVTX"));
}

TEST(NvtxTool, AMissingLibraryIsReportedNotFatal) {
  detail::nvtx::reload_for_testing("/nonexistent/libToolsInjection64.so");
  EXPECT_FALSE(detail::nvtx::attached());
  EXPECT_THAT(detail::nvtx::status(), HasSubstr("could not load NVTX_INJECTION64_PATH=/nonexistent"));
  EXPECT_EQ(detail::nvtx::range_start("x"), 0u);
  detail::nvtx::range_end(0);
  detail::nvtx::push("x");
  detail::nvtx::pop();
  detail::nvtx::reload_for_testing(nullptr);
}

}  // namespace
}  // namespace ferry
