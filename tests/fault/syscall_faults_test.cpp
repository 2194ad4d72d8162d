// Fault injection through ScriptedSyscalls: short transfers, EINTR/EAGAIN, EIO and ENOSPC at an offset,
// O_DIRECT refused at open or at the read, permission errors, the page-cache probe refused. Each test checks the
// outcome and what the error or report says about it.
#include <fcntl.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fault/fault_test.hpp"
#include "source/posix_source.hpp"
#include "support/status_matchers.hpp"

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::HasSubstr;

namespace ferry {
namespace {

using testing::SentinelBuffer;
using testing::Op;
using testing::Rule;
using testing::ScriptedSyscalls;
using testing::StatusIs;
using FaultShortRead = testing::FaultTest;
using FaultShortWrite = testing::FaultTest;
using FaultEintr = testing::FaultTest;
using FaultEio = testing::FaultTest;
using FaultEnospc = testing::FaultTest;
using FaultSync = testing::FaultTest;
using FaultStat = testing::FaultTest;
using FaultOpen = testing::FaultTest;
using CacheProbe = testing::FaultTest;
// Tasks of `task` bytes in place of kTask's.
template <std::uint64_t task>
class FaultTestWithTasksOf : public testing::FaultTest {
 protected:
  static constexpr std::uint64_t kTask = task;
  static Config fault_config(DirectIo direct, unsigned threads = 4) {
    return FaultTest::fault_config(direct, threads).set_task_size(kTask);
  }
  // Reads a new file of `tasks` tasks whole in `auto`, on one worker (tasks in order), and checks its bytes.
  Result<Transfer> read_file_of_tasks(int tasks) {
    const std::uint64_t size = static_cast<std::uint64_t>(tasks) * kTask;
    auto path = testing::write_pattern_file(dir_ / "d.bin", size);
    auto file = open(path, "r", fault_config(DirectIo::automatic, 1));
    if (!file.ok()) return file.status();
    direct_io_available_ = file->direct_io_available();
    SentinelBuffer buf(size);
    auto r = file->pread(buf.data(), size, 0).get();
    if (r.ok()) {
      EXPECT_TRUE(buf.holds(0, size));
    }
    return r;
  }
  // Of the reads made so far, those that asked the page cache without waiting.
  int nowait_reads() const {
    int n = 0;
    for (const auto& c : sys_.calls(Op::pread)) n += c.nowait ? 1 : 0;
    return n;
  }
  bool direct_io_available_ = false;  // read_file_of_tasks()'s file had O_DIRECT
};
// Small tasks in `auto` read the page cache first; larger ones, up to kMostGatheredBytes, once a probe found
// one cached; the largest always ask cachestat whether to use O_DIRECT.
using FaultSmallRead = FaultTestWithTasksOf<detail::kSmallReadBytes>;
using FaultMidSizeRead = FaultTestWithTasksOf<detail::kMostGatheredBytes>;
using FaultCacheProbe = FaultTestWithTasksOf<2 * detail::kMostGatheredBytes>;
using FaultLifetime = testing::FaultTest;

constexpr std::uint64_t kMiB = 1024 * 1024;

bool any_note_has(const Report& r, const std::string& text) {
  return std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.find(text) != n.npos; });
}

// ---- short transfers, EINTR, EAGAIN ----

TEST_F(FaultShortRead, SecondPreadReturnsHalfAndTheBytesAreStillRight) {
  const std::uint64_t size = 4 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::pread).nth_call(2).returns_half());
  auto file = open(path, "r", fault_config(DirectIo::off));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, size);
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_EQ(sys_.scripted_count(), 1);
  EXPECT_EQ(r->report.io.short_transfers, 1u);
  EXPECT_EQ(file->report().io.short_transfers, 1u);
  EXPECT_EQ(sys_.count(Op::pread), 5) << "4 tasks plus one call to continue the short one";
}

TEST_F(FaultShortRead, EveryPreadReturningHalfStillCompletesEachTask) {
  const std::uint64_t size = 2 * kTask + 3000;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::pread).returns_half());
  auto file = open(path, "r", fault_config(DirectIo::off));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size - 1, 1).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, size - 1);
  EXPECT_TRUE(buf.holds(1, size - 1));
  EXPECT_GT(r->report.io.short_transfers, 10u);
}

TEST_F(FaultShortRead, ShortReadsOnTheDirectDescriptorFinishTheTask) {
  // Regression: a short O_DIRECT read can leave a remainder that is no longer aligned (possible on network and FUSE
  // file systems); the task must still deliver every byte.
  const std::uint64_t size = 2 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::pread).only_direct().returns_half());
  auto file = open(path, "r", fault_config(DirectIo::on));
  ASSERT_TRUE(file.ok());
  if (!file->direct_io_available()) GTEST_SKIP() << "no O_DIRECT here: " << file->direct_io_note();
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, size);
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_GT(r->report.io.short_transfers, 0u);
}

TEST_F(FaultShortWrite, HalfWritesAreContinued) {
  auto path = (dir_ / "w.bin").string();
  sys_.add(Rule::on(Op::pwrite).returns_half());
  auto file = open(path, "w", fault_config(DirectIo::off));
  ASSERT_TRUE(file.ok());
  auto data = testing::pattern(0, 3 * kTask + 11);
  auto r = file->pwrite(data.data(), data.size(), 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, data.size());
  EXPECT_EQ(testing::read_whole_file(path), data);
  EXPECT_GT(r->report.io.short_transfers, 4u);
}

TEST_F(FaultShortWrite, ShortWritesOnTheDirectDescriptorFinishTheTask) {
  // Regression, as for reads: a short O_DIRECT write leaving an unaligned remainder failed with EINVAL.
  auto path = (dir_ / "w.bin").string();
  sys_.add(Rule::on(Op::pwrite).only_direct().returns_half());
  auto file = open(path, "w", fault_config(DirectIo::on));
  ASSERT_TRUE(file.ok());
  if (!file->direct_io_available()) GTEST_SKIP() << "no O_DIRECT here: " << file->direct_io_note();
  SentinelBuffer buf(2 * kTask);
  auto data = testing::pattern(0, 2 * kTask);
  std::memcpy(buf.data(), data.data(), data.size());
  auto r = file->pwrite(buf.data(), 2 * kTask, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(r->report.io.direct_ops, 0u);
  EXPECT_EQ(testing::read_whole_file(path), data);
}

TEST_F(FaultShortWrite, WriteThatMakesNoProgressFailsInsteadOfSpinning) {
  auto path = (dir_ / "w.bin").string();
  sys_.add(Rule::on(Op::pwrite).returns_eof());
  auto file = open(path, "w", fault_config(DirectIo::off, 1));
  ASSERT_TRUE(file.ok());
  auto data = testing::pattern(0, 100);
  auto r = file->pwrite(data.data(), data.size(), 4096).get();
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error, AllOf(HasSubstr("offset 4096"), HasSubstr(path))));
}

TEST_F(FaultEintr, ThreeEintrsAreRetriedAndCounted) {
  const std::uint64_t size = 3 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::pread).fail(EINTR).limit(3));
  auto file = open(path, "r", fault_config(DirectIo::off));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_EQ(r->report.io.eintr_retries, 3u);
  EXPECT_EQ(file->report().io.eintr_retries, 3u);
}

TEST_F(FaultEintr, EagainIsRetriedLikeEintr) {
  const std::uint64_t size = kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::pread).fail(EAGAIN).limit(2));
  sys_.add(Rule::on(Op::pwrite).fail(EINTR).limit(2));
  auto file = open(path, "r+", fault_config(DirectIo::off));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_EQ(r->report.io.eintr_retries, 2u);
  auto w = file->pwrite(buf.data(), size, 0).get();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->report.io.eintr_retries, 2u);
  EXPECT_EQ(testing::read_whole_file(path), testing::pattern(0, size));
}

TEST_F(FaultEintr, EndlessEintrGivesUpWithAClearError) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", 4096);
  sys_.add(Rule::on(Op::pread).fail(EINTR));
  auto file = open(path, "r", fault_config(DirectIo::off, 1));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(4096);
  auto r = file->pread(buf.data(), 4096, 0).get();
  ASSERT_THAT(r, StatusIs(ferry::ErrorCode::io_error));
  EXPECT_EQ(r.status().sys_errno(), EINTR);
  EXPECT_THAT(r.status().to_string(), HasSubstr("EINTR"));
  EXPECT_THAT(r.status().message(), HasSubstr(path));
  EXPECT_LE(sys_.count(Op::pread), 1001) << "retries are bounded";
}

// ---- EIO, ENOSPC ----

TEST_F(FaultEio, ReadErrorNamesPathOffsetAndCauseUnderEachPolicy) {
  const std::uint64_t size = 2 * kMiB;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  for (DirectIo policy : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    SCOPED_TRACE(direct_io_name(policy));
    ScriptedSyscalls sys;
    sys.add(Rule::on_io().covering(kMiB).fail(EIO));
    auto file = open(path, "r", fault_config(policy), &sys);
    ASSERT_TRUE(file.ok());
    SentinelBuffer buf(size);
    auto r = file->pread(buf.data(), size, 0).get();
    ASSERT_THAT(r, StatusIs(ErrorCode::io_error,
                            AllOf(HasSubstr("offset 1048576"), HasSubstr(path), HasSubstr("via host"))));
    const Status& s = r.status();
    EXPECT_EQ(s.sys_errno(), EIO);
    EXPECT_EQ(s.path(), path);
    EXPECT_THAT(s.to_string(), HasSubstr("EIO"));
    EXPECT_THAT(s.to_string(), HasSubstr("Input/output error"));
    EXPECT_THAT(s.to_string(), HasSubstr("io_error: Could not read"));
    // EIO is never retried.
    int covering = 0;
    for (const auto& c : sys.calls()) {
      if (c.op == Op::pread && c.offset <= kMiB && kMiB < c.offset + c.count) ++covering;
    }
    EXPECT_EQ(covering, 1);
  }
}

TEST_F(FaultEio, ErrorInsideATaskNamesTheOffsetOfTheFailingCall) {
  const std::uint64_t size = 4 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  // The first call of task 2 returns half; the continuation (at 2.5 tasks) fails.
  sys_.add(Rule::on(Op::pread).covering(2 * kTask).returns_half().limit(1));
  sys_.add(Rule::on(Op::pread).covering(2 * kTask + kTask / 2).fail(EIO));
  auto file = open(path, "r", fault_config(DirectIo::off, 1));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  EXPECT_THAT(r, StatusIs(ErrorCode::io_error, AllOf(HasSubstr("at offset " + std::to_string(2 * kTask + kTask / 2)),
                                                     HasSubstr(std::to_string(kTask / 2) + " bytes"))));
}

TEST_F(FaultEio, DirectReadErrorSaysODirect) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", 4 * kTask);
  sys_.add(Rule::on(Op::pread).only_direct().covering(kTask).fail(EIO));
  auto file = open(path, "r", fault_config(DirectIo::on));
  ASSERT_TRUE(file.ok());
  if (!file->direct_io_available()) GTEST_SKIP() << file->direct_io_note();
  SentinelBuffer buf(4 * kTask);
  auto r = file->pread(buf.data(), 4 * kTask, 0).get();
  EXPECT_THAT(r, StatusIs(ErrorCode::io_error, AllOf(HasSubstr("O_DIRECT"), HasSubstr("offset 65536"))));
}

TEST_F(FaultEnospc, WriteErrorIsNoSpaceNamingPathAndOffset) {
  auto path = (dir_ / "full.bin").string();
  for (DirectIo policy : {DirectIo::off, DirectIo::on}) {
    SCOPED_TRACE(direct_io_name(policy));
    ScriptedSyscalls sys;
    sys.add(Rule::on(Op::pwrite).covering(3 * kTask).fail(ENOSPC));
    auto file = open(path, "w", fault_config(policy), &sys);
    ASSERT_TRUE(file.ok());
    SentinelBuffer buf(6 * kTask);
    std::memset(buf.data(), 7, 6 * kTask);
    auto r = file->pwrite(buf.data(), 6 * kTask, 0).get();
    ASSERT_THAT(r, StatusIs(ErrorCode::no_space,
                            AllOf(HasSubstr("Could not write"), HasSubstr("offset 196608"), HasSubstr(path))));
    const Status& s = r.status();
    EXPECT_EQ(s.sys_errno(), ENOSPC);
    EXPECT_EQ(s.path(), path);
    EXPECT_THAT(s.to_string(), HasSubstr("ENOSPC"));
    EXPECT_THAT(s.to_string(), HasSubstr("No space left on device"));
  }
}

TEST_F(FaultEnospc, BlockingWriteReportsTheSameError) {
  auto path = (dir_ / "full.bin").string();
  sys_.add(Rule::on(Op::pwrite).fail(ENOSPC));
  auto file = open(path, "a", fault_config(DirectIo::off));
  ASSERT_TRUE(file.ok());
  char data[10] = {};
  auto r = file->write(data, sizeof data);
  EXPECT_THAT(r, StatusIs(ErrorCode::no_space, HasSubstr("offset 0")));
}

TEST_F(FaultEnospc, FailedBlockingWriteDoesNotMoveThePosition) {
  // Regression: a failed write() still advanced the write position (and in mode "a" the append cursor),
  // so the next successful write() left a hole of zeros where the failed bytes would have gone.
  for (const char* mode : {"w", "a"}) {
    SCOPED_TRACE(mode);
    auto path = (dir_ / (std::string("f-") + mode)).string();
    ScriptedSyscalls sys;
    sys.add(Rule::on(Op::pwrite).fail(ENOSPC).limit(1));
    auto file = open(path, mode, fault_config(DirectIo::off), &sys);
    ASSERT_TRUE(file.ok());
    const char lost[] = "lost-";
    const char kept[] = "kept";
    ASSERT_THAT(file->write(lost, 5), StatusIs(ferry::ErrorCode::no_space));
    auto w = file->write(kept, 4);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    auto back = testing::read_whole_file(path);
    EXPECT_EQ(std::string(back.begin(), back.end()), "kept");
  }
}

TEST_F(FaultSync, FdatasyncFailureIsIoErrorNamingThePath) {
  auto path = (dir_ / "s.bin").string();
  sys_.add(Rule::on(Op::fdatasync).fail(EIO));
  auto file = open(path, "w", fault_config(DirectIo::off));
  ASSERT_TRUE(file.ok());
  Status s = file->sync();
  ASSERT_THAT(s, StatusIs(ErrorCode::io_error));
  EXPECT_EQ(s.sys_errno(), EIO);
  EXPECT_THAT(s.to_string(), HasSubstr(path));
  EXPECT_THAT(s.to_string(), HasSubstr("EIO"));
}

TEST_F(FaultStat, FstatFailureBeforeAReadFailsItNamingThePath) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", 4096);
  auto file = open(path, "r", fault_config(DirectIo::off));
  ASSERT_TRUE(file.ok());
  sys_.add(Rule::on(Op::fstat).fail(EIO));
  char buf[16];
  auto r = file->pread(buf, sizeof buf, 0).get();
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error));
  EXPECT_THAT(r.status().to_string(), HasSubstr(path));
  auto size = file->size();
  ASSERT_THAT(size, StatusIs(ferry::ErrorCode::io_error));
  EXPECT_THAT(size.status().to_string(), HasSubstr(path));
}

// ---- opening ----

TEST_F(FaultOpen, PermissionDeniedNamesThePath) {
  auto path = testing::write_pattern_file(dir_ / "secret.bin", 10);
  sys_.add(Rule::on(Op::open).fail(EACCES));
  auto file = open(path, "r", fault_config(DirectIo::automatic));
  ASSERT_THAT(file, StatusIs(ErrorCode::permission_denied));
  EXPECT_EQ(file.status().sys_errno(), EACCES);
  EXPECT_EQ(file.status().path(), path);
  EXPECT_THAT(file.status().to_string(), HasSubstr(path));
  EXPECT_THAT(file.status().to_string(), HasSubstr("EACCES"));
  EXPECT_THAT(file.status().to_string(), HasSubstr("Permission denied"));
}

TEST_F(FaultOpen, ODirectRefusedAtOpenFallsBackToBufferedAndSaysSo) {
  const std::uint64_t size = 4 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::open).only_direct().fail(EINVAL));
  auto file = open(path, "r", fault_config(DirectIo::on));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_FALSE(file->direct_io_available());
  EXPECT_THAT(file->direct_io_note(), HasSubstr("O_DIRECT"));
  EXPECT_THAT(file->direct_io_note(), HasSubstr("EINVAL"));
  EXPECT_THAT(file->direct_io_note(), HasSubstr(path));
  EXPECT_THAT(file->report().notes, Contains(file->direct_io_note()));
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, size);
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_EQ(r->report.io.direct_ops, 0u);
  EXPECT_EQ(r->report.io.buffered_ops, 4u);
  EXPECT_THAT(file->report().notes, Contains(file->direct_io_note())) << "the note survives later requests";
  EXPECT_THAT(file->report().table(), HasSubstr("refused O_DIRECT"));
  // No call went to an O_DIRECT descriptor.
  for (const auto& c : sys_.calls()) EXPECT_FALSE(c.direct && c.op != Op::open) << testing::op_name(c.op);
}

TEST_F(FaultOpen, ODirectRefusedAtReadFallsBackToBufferedAndSaysSo) {
  const std::uint64_t size = 4 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::pread).only_direct().fail(EINVAL));
  sys_.add(Rule::on(Op::pwrite).only_direct().fail(EINVAL));
  auto file = open(path, "r+", fault_config(DirectIo::on));
  ASSERT_TRUE(file.ok());
  if (!file->direct_io_available()) GTEST_SKIP() << file->direct_io_note();
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_TRUE(any_note_has(r->report, "O_DIRECT read refused (EINVAL)"));
  EXPECT_EQ(r->report.io.direct_ops, 0u);
  auto w = file->pwrite(buf.data(), size, 0).get();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_TRUE(any_note_has(w->report, "O_DIRECT write refused (EINVAL)"));
  EXPECT_EQ(w->report.io.direct_ops, 0u);
  EXPECT_EQ(testing::read_whole_file(path), testing::pattern(0, size));
}

TEST_F(FaultOpen, RealMissingFileAndRealDirectory) {
  auto missing = open((dir_ / "missing").string(), "r", fault_config(DirectIo::automatic));
  ASSERT_THAT(missing, StatusIs(ErrorCode::not_found));
  EXPECT_THAT(missing.status().to_string(), HasSubstr("ENOENT"));
  auto directory = open(dir_.string(), "r", fault_config(DirectIo::automatic));
  ASSERT_THAT(directory, StatusIs(ErrorCode::is_a_directory));
  EXPECT_THAT(directory.status().to_string(), HasSubstr(dir_.string()));
  // Nothing leaked: every descriptor opened was closed.
  int opened = 0, closed = 0;
  for (const auto& c : sys_.calls()) {
    if (c.op == Op::open && c.result >= 0) ++opened;
    if (c.op == Op::close && c.result == 0) ++closed;
  }
  EXPECT_EQ(opened, closed);
}

TEST_F(FaultOpen, RealTmpfsODirectIsReportedConsistently) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  // The one deliberate file outside the build tree: tmpfs is where O_DIRECT is refused on older kernels.
  auto path = std::string("/dev/shm/ferry-odirect-probe-") + std::to_string(::getpid()) + ".bin";
  struct Cleanup {
    std::string p;
    ~Cleanup() { std::filesystem::remove(p); }
  } cleanup{path};
  testing::write_pattern_file(path, 2 * kTask);
  auto file = File::open(path, "r", fault_config(DirectIo::on));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  SentinelBuffer buf(2 * kTask);
  auto r = file->pread(buf.data(), 2 * kTask, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, 2 * kTask));
  if (file->direct_io_available()) {
    EXPECT_EQ(file->direct_io_note(), "");
    EXPECT_GT(r->report.io.direct_ops + r->report.notes.size(), 0u);
  } else {
    EXPECT_THAT(file->direct_io_note(), HasSubstr("O_DIRECT"));
    EXPECT_THAT(file->report().notes, Contains(file->direct_io_note()));
    EXPECT_EQ(r->report.io.direct_ops, 0u);
  }
}

// ---- the page-cache probe (cachestat, else mincore) ----

TEST_F(FaultCacheProbe, UnsupportedProbeMeansBufferedReadsAndANote) {
  const std::uint64_t size = 4 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::cached_pages).fail(ENOSYS));
  auto file = open(path, "r", fault_config(DirectIo::automatic, 1));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_TRUE(any_note_has(r->report, "cannot tell what of"));
  EXPECT_TRUE(any_note_has(r->report, "ENOSYS"));
  EXPECT_EQ(r->report.io.buffered_ops, 4u);
  EXPECT_EQ(r->report.io.direct_ops, 0u);
  EXPECT_EQ(sys_.count(Op::cached_pages), 1) << "a refusal is remembered for the file";
  auto again = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(sys_.count(Op::cached_pages), 1);
  EXPECT_TRUE(any_note_has(file->report(), "cannot tell what of"));
}

TEST_F(FaultCacheProbe, NothingCachedGoesToODirectAndStartsNoBufferedRead) {
  const std::uint64_t size = 4 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::cached_pages).reports_cached(false));
  auto file = open(path, "r", fault_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_EQ(r->report.io.cached_ops, 0u);
  if (file->direct_io_available()) {
    EXPECT_EQ(r->report.io.direct_ops, 4u);
    // Cold data must not be read twice: no buffered read (which would start readahead) before O_DIRECT.
    for (const auto& c : sys_.calls()) EXPECT_FALSE(c.op == Op::pread && !c.direct) << "buffered pread at " << c.offset;
  } else {
    EXPECT_EQ(r->report.io.buffered_ops, 4u);
  }
}

TEST_F(FaultCacheProbe, WhollyCachedTasksReadThroughTheCache) {
  const std::uint64_t size = 4 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::cached_pages).reports_cached(true));
  auto file = open(path, "r", fault_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_EQ(r->report.io.cached_ops, 4u);
  EXPECT_EQ(r->report.io.buffered_ops, 4u);
  EXPECT_EQ(r->report.io.direct_ops, 0u);
}

TEST_F(FaultCacheProbe, PartlyCachedTaskGoesDirectAndIsCorrect) {
  const std::uint64_t size = 4 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::cached_pages).returns_half());
  sys_.add(Rule::on(Op::pread).only_nowait().fail(EAGAIN));  // the unaligned head is a small task: a miss too
  auto file = open(path, "r", fault_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size - 5, 5).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, size - 5);
  EXPECT_TRUE(buf.holds(5, size - 5));
  EXPECT_EQ(r->report.io.cached_ops, 0u) << "no task was wholly in the cache";
}

TEST_F(FaultCacheProbe, EintrOnTheProbeIsRetried) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", kTask);
  sys_.add(Rule::on(Op::cached_pages).fail(EINTR).limit(2));
  sys_.add(Rule::on(Op::cached_pages).reports_cached(true));
  auto file = open(path, "r", fault_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(kTask);
  auto r = file->pread(buf.data(), kTask, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, kTask));
  EXPECT_EQ(r->report.io.eintr_retries, 2u);
  EXPECT_EQ(r->report.io.cached_ops, 1u);
}

// ---- small reads in `auto`: the page cache is asked by reading it without waiting ----

TEST_F(FaultSmallRead, CachedTasksTakeOneReadEachAndNoProbe) {
  const std::uint64_t size = 4 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);  // just written: in the page cache
  auto file = open(path, "r", fault_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  auto r = file->pread(buf.data(), size, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, size));
  EXPECT_EQ(sys_.count(Op::cached_pages), 0) << "no cachestat before a small read";
  EXPECT_EQ(r->report.io.cached_ops, 4u);
  EXPECT_EQ(r->report.io.buffered_ops, 4u);
  EXPECT_EQ(r->report.io.direct_ops, 0u);
  const auto reads = sys_.calls(Op::pread);
  EXPECT_EQ(reads.size(), 4u) << "one read per task";
  for (const auto& c : reads) EXPECT_TRUE(c.nowait && !c.direct) << "at offset " << c.offset;
}

TEST_F(FaultSmallRead, AMissIsReadBufferedOnceAndNeverWithODirect) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", kTask);
  sys_.add(Rule::on(Op::pread).only_nowait().fail(EAGAIN));  // as if nothing were cached
  auto file = open(path, "r", fault_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(kTask);
  auto r = file->pread(buf.data(), kTask, 0).get();  // one aligned task, which O_DIRECT could take
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kTask);
  EXPECT_TRUE(buf.holds(0, kTask));
  EXPECT_EQ(r->report.io.cached_ops, 0u);
  EXPECT_EQ(r->report.io.eintr_retries, 0u) << "EAGAIN from a read that must not wait is an answer, not retried";
  EXPECT_EQ(sys_.count(Op::cached_pages), 0);
  // The kernel began reading the pages in on the miss: an O_DIRECT read would read them a second time.
  const auto reads = sys_.calls(Op::pread);
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_TRUE(reads[0].nowait);
  EXPECT_FALSE(reads[1].nowait || reads[1].direct) << "the rest: one buffered read";
}

// A file whose small reads miss turns them to the probe (and O_DIRECT for what is not cached), and back to
// reading the cache first once the probes find them cached (kSmallReadMemory).
TEST_F(FaultSmallRead, ColdSmallReadsTurnToTheProbeAndBackOnceCached) {
  sys_.add(Rule::on(Op::pread).only_nowait().fail(EAGAIN).limit(1));  // the first small read misses
  sys_.add(Rule::on(Op::cached_pages).reports_cached(false).limit(10));  // so do the next ten
  sys_.add(Rule::on(Op::cached_pages).reports_cached(true));             // then the file is cached
  auto r = read_file_of_tasks(40);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Task 0 misses (score 1); tasks 1-10 are probed and missed (score 11; O_DIRECT); tasks 11-21 are probed
  // and found cached (score 0); tasks 22-39 read the cache first and hit.
  EXPECT_EQ(sys_.count(Op::cached_pages), 21);
  EXPECT_EQ(nowait_reads(), 1 + 18);
  EXPECT_EQ(r->report.io.cached_ops, 11u + 18u);
  if (direct_io_available_) {
    EXPECT_EQ(r->report.io.direct_ops, 10u);
  }
}

TEST_F(FaultSmallRead, ACachedPrefixIsKeptAndTheRestReadBuffered) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", kTask);
  sys_.add(Rule::on(Op::pread).only_nowait().returns_half().limit(1));  // the first half is cached
  sys_.add(Rule::on(Op::pread).only_nowait().fail(EAGAIN));             // the second is not
  auto file = open(path, "r", fault_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(kTask);
  auto r = file->pread(buf.data(), kTask, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(buf.holds(0, kTask));
  EXPECT_EQ(r->report.io.cached_ops, 0u) << "the task was not wholly cached";
  const auto reads = sys_.calls(Op::pread);
  ASSERT_EQ(reads.size(), 3u);
  EXPECT_FALSE(reads[2].nowait);
  EXPECT_EQ(reads[2].offset, kTask / 2) << "the buffered read starts where the cached prefix ended";
}

TEST_F(FaultSmallRead, EioOnTheReadThatMustNotWaitFailsNamingTheOffset) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", 2 * kTask);
  sys_.add(Rule::on(Op::pread).only_nowait().covering(kTask).fail(EIO));
  auto file = open(path, "r", fault_config(DirectIo::automatic));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(2 * kTask);
  auto r = file->pread(buf.data(), 2 * kTask, 0).get();
  ASSERT_THAT(r, StatusIs(ErrorCode::io_error, AllOf(HasSubstr(fmt::format("offset {}", kTask)), HasSubstr(path))));
  EXPECT_EQ(r.status().sys_errno(), EIO) << "never retried, never read around";
}

TEST_F(FaultSmallRead, ARefusedNowaitReadIsRememberedAndTheProbeDecidesInstead) {
  const std::uint64_t size = 2 * kTask;
  auto path = testing::write_pattern_file(dir_ / "d.bin", size);
  sys_.add(Rule::on(Op::pread).only_nowait().fail(EOPNOTSUPP));
  sys_.add(Rule::on(Op::cached_pages).reports_cached(true));
  auto file = open(path, "r", fault_config(DirectIo::automatic, 1));
  ASSERT_TRUE(file.ok());
  SentinelBuffer buf(size);
  for (int round = 0; round < 2; ++round) {
    auto r = file->pread(buf.data(), size, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(buf.holds(0, size));
  }
  EXPECT_EQ(nowait_reads(), 1) << "a refusal is remembered for the file";
  EXPECT_EQ(sys_.count(Op::cached_pages), 3) << "the tasks after it are probed as large ones are";
}

// ---- reads of 16-64 KiB in `auto`: probed until one is found cached, then the cache is read first ----

TEST_F(FaultMidSizeRead, OnceAProbeFoundOneCachedTheRestReadTheCacheFirst) {
  sys_.add(Rule::on(Op::cached_pages).reports_cached(true));
  auto r = read_file_of_tasks(8);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(sys_.count(Op::cached_pages), 1) << "only the first task, of a size not known hot yet, is probed";
  EXPECT_EQ(nowait_reads(), 7);
  EXPECT_EQ(sys_.count(Op::pread), 8) << "one read per task";
  EXPECT_EQ(r->report.io.cached_ops, 8u);
  EXPECT_EQ(r->report.io.direct_ops, 0u);
}

TEST_F(FaultMidSizeRead, ColdOnesAreProbedAndReadWithODirectNeverThroughTheCache) {
  sys_.add(Rule::on(Op::cached_pages).reports_cached(false));
  auto r = read_file_of_tasks(8);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(sys_.count(Op::cached_pages), 8);
  EXPECT_EQ(nowait_reads(), 0);
  if (direct_io_available_) {
    EXPECT_EQ(r->report.io.direct_ops, 8u);
  }
}

// Found cached once, then a miss: the kernel began reading that task's pages in (the rest of it is read
// buffered), and the next tasks are probed again, the cold ones read with O_DIRECT.
TEST_F(FaultMidSizeRead, AMissTurnsThemBackToTheProbe) {
  sys_.add(Rule::on(Op::cached_pages).reports_cached(true).limit(1));
  sys_.add(Rule::on(Op::cached_pages).reports_cached(false));
  sys_.add(Rule::on(Op::pread).only_nowait().fail(EAGAIN));
  auto r = read_file_of_tasks(8);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Task 0: probed, cached. Task 1: read first, missed (then read buffered). Tasks 2-7: probed again.
  EXPECT_EQ(nowait_reads(), 1);
  EXPECT_EQ(sys_.count(Op::cached_pages), 1 + 6);
  if (direct_io_available_) {
    EXPECT_EQ(r->report.io.direct_ops, 6u);
    for (const auto& c : sys_.calls(Op::pread)) {
      if (c.offset == kTask) {
        EXPECT_FALSE(c.direct) << "the missed task was read with O_DIRECT after its miss";
      }
    }
  }
}

TEST_F(CacheProbe, RealKernelSeesAJustWrittenFileAsCached) {
  auto path = testing::write_pattern_file(dir_ / "d.bin", 1 << 20);
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::uint64_t cached = 0, total = 0;
  int rc = detail::real_syscalls().cached_pages(fd, 0, 1 << 20, &cached, &total);
  ASSERT_EQ(rc, 0) << errno_name(-rc);
  EXPECT_EQ(total, 256u);
  EXPECT_EQ(cached, 256u);
  ASSERT_EQ(::fdatasync(fd), 0);  // dirty pages cannot be dropped
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  rc = detail::real_syscalls().cached_pages(fd, 0, 1 << 20, &cached, &total);
  ASSERT_EQ(rc, 0);
  EXPECT_LT(cached, 256u) << "clean pages dropped by POSIX_FADV_DONTNEED still counted as cached";
  ::close(fd);
}

// ---- lifetime ----

TEST_F(FaultLifetime, DescriptorsAreClosedOnceTheFileIsGoneAfterGet) {
  // Regression: a finished request kept the File's state alive until its worker dropped the job, so the
  // descriptors were closed (through the Syscalls the File was opened with) at some moment after get()
  // returned and the File was destroyed: a use after free when those Syscalls were gone too.
  auto path = testing::write_pattern_file(dir_ / "d.bin", 8 * kTask);
  SentinelBuffer buf(8 * kTask);
  for (int round = 0; round < 50; ++round) {
    auto sys = std::make_unique<ScriptedSyscalls>();
    {
      auto file = open(path, "r", fault_config(DirectIo::off, 4), sys.get());
      ASSERT_TRUE(file.ok());
      auto r = file->pread(buf.data(), 8 * kTask, 0).get();
      ASSERT_TRUE(r.ok()) << r.status().to_string();
    }
    int opened = 0, closed = 0;
    for (const auto& c : sys->calls()) {
      if (c.op == Op::open && c.result >= 0) ++opened;
      if (c.op == Op::close) ++closed;
    }
    ASSERT_EQ(closed, opened) << "round " << round << ": descriptors still open after the File was destroyed";
    sys.reset();  // a late close would now touch freed memory
  }
}

}  // namespace
}  // namespace ferry
