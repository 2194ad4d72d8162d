// Saving under faults scripted at the system-call seam: ENOSPC midway, a failed fdatasync, short writes, O_DIRECT
// refused at the write. Each test checks what the error says, that the target is exactly as it was, that
// nothing is left in the directory, and that no descriptor still holds the new file (its space is freed).
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backends/staging_pool.hpp"
#include "safetensors/saver.hpp"
#include "support/fake_platform.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace ferry::safetensors {
namespace {

namespace fs = std::filesystem;
using testing::Op;
using testing::Rule;
using testing::ScriptedSyscalls;
using testing::StatusIs;

class SafetensorsSaveFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::test_dir();
    // Three tensors over two staging windows: "a" fills the first, "b" and "c" the second.
    for (int i = 0; i < 3; ++i) data_.push_back(testing::pattern(i * 7777, i == 0 ? kSaveWindowBytes : 1 << 20));
    tensors_ = {{"a", Dtype::u8, {data_[0].size()}, data_[0].data()},
                {"b", Dtype::u8, {data_[1].size()}, data_[1].data()},
                {"c", Dtype::u8, {data_[2].size()}, data_[2].data()}};
    path_ = (dir_ / "model.safetensors").string();
    std::ofstream(path_) << "the previous checkpoint";
    before_ = testing::read_whole_file(path_);
  }
  void TearDown() override { ferry::detail::process_staging_pool().clear(); }

  Result<SaveStats> save(ScriptedSyscalls& sys, bool durable = true) {
    SaveOptions o;
    Config c;
    c.set_task_size(1 << 20).set_threads(4);
    o.config = c;
    o.durable = durable;
    ferry::detail::OpenOptions seams;
    seams.syscalls = &sys;
    seams.gpu = &testing::fake_gpu_platform();
    return detail::save_with(path_, tensors_, o, seams);
  }

  // The target as it was, nothing else in the directory, and no descriptor on a deleted file there.
  void expect_untouched() {
    EXPECT_EQ(testing::read_whole_file(path_), before_);
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    EXPECT_THAT(names, ElementsAre("model.safetensors"));
    for (const auto& fd : fs::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      std::string to = fs::read_symlink(fd.path(), ec).string();
      EXPECT_FALSE(to.rfind(dir_.string(), 0) == 0 && to.find("(deleted)") != std::string::npos)
          << fd.path() << " still holds the unfinished file: " << to;
    }
  }

  fs::path dir_;
  std::string path_;
  std::vector<std::vector<std::uint8_t>> data_;
  std::vector<SaveTensor> tensors_;
  std::vector<std::uint8_t> before_;
};

TEST_F(SafetensorsSaveFaults, NoSpaceMidwayLeavesTheTargetAndFreesTheNewFile) {
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pwrite).covering(kSaveWindowBytes + 4096).fail(ENOSPC));
  auto r = save(sys);
  EXPECT_THAT(r, StatusIs(ErrorCode::no_space, HasSubstr("Could not save \"" + path_ + "\": writing bytes [33554432, ")));
  EXPECT_THAT(r, StatusIs(ErrorCode::no_space, HasSubstr("tensors \"a\" to \"c\"")));
  EXPECT_EQ(r.status().sys_errno(), ENOSPC);
  EXPECT_EQ(r.status().path(), path_);
  expect_untouched();
}

TEST_F(SafetensorsSaveFaults, NoSpaceInANamedTemporaryFileRemovesIt) {
  testing::ScopedEnv named("FERRY_CLI_TEST_NO_O_TMPFILE", "1");
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pwrite).covering(4096).fail(ENOSPC));
  EXPECT_THAT(save(sys), StatusIs(ErrorCode::no_space, HasSubstr("the header and tensor \"a\"")));
  expect_untouched();
}

TEST_F(SafetensorsSaveFaults, AFailedSyncLeavesTheTarget) {
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::fdatasync).fail(EIO));
  EXPECT_THAT(save(sys), StatusIs(ErrorCode::io_error, HasSubstr("Could not save \"" + path_ + "\"")));
  expect_untouched();
}

TEST_F(SafetensorsSaveFaults, ScratchSavesDoNotSync) {
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::fdatasync).fail(EIO));  // would fail a durable save
  auto r = save(sys, /*durable=*/false);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(sys.count(Op::fdatasync), 0);
  EXPECT_EQ(r->sync_seconds, 0.0);
}

TEST_F(SafetensorsSaveFaults, ShortWritesAndRefusedDirectWritesStillMakeTheWholeFile) {
  ScriptedSyscalls sys;
  sys.add(Rule::on(Op::pwrite).nth_call(2).returns_half());
  sys.add(Rule::on(Op::pwrite).only_direct().fail(EINVAL).limit(1));
  auto r = save(sys);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto h = serialize_header(tensors_, std::nullopt);
  std::vector<std::uint8_t> want(h->bytes.begin(), h->bytes.end());
  for (std::size_t i : h->order) want.insert(want.end(), data_[i].begin(), data_[i].end());
  EXPECT_EQ(testing::read_whole_file(path_), want);
  EXPECT_GE(sys.scripted_count(), 1);
}

}  // namespace
}  // namespace ferry::safetensors
