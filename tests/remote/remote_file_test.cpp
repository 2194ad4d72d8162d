// ferry::File opened by URL (nginx on loopback, the fault proxy in front of it): the engine runs one range
// request per task, remote_connections at once; the host route reads the object into host memory and the
// staged route into (fake) GPU memory, byte-exact with nothing written past the count; cuFile is never
// asked; writes are refused; the report says what the remote reads cost; cancelling a request ends its
// transfers, however slow the server (issue 23).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/staging_pool.hpp"
#include "ferry/file.hpp"
#include "file/open_options.hpp"
#include "remote/servers.hpp"
#include "support/watchdog.hpp"
#include "support/fake_cuda.hpp"
#include "support/fake_cufile.hpp"
#include "support/fake_platform.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace ferry {
namespace {

constexpr std::uint64_t kSize = 5 * (1 << 20) + 777;

class RemoteFile : public ::testing::Test {
 protected:
  void SetUp() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
    dir_ = testing::test_dir();
    std::filesystem::create_directories(dir_ / "root");
    testing::write_pattern_file(dir_ / "root" / "weights.bin", kSize);
    if (auto why = nginx_.start(dir_ / "root", dir_ / "nginx"); !why.empty()) GTEST_SKIP() << why;
  }
  void TearDown() override {
    detail::process_staging_pool().clear();
    testing::reset_fake_cuda();
    testing::reset_fake_cufile();
  }
  Result<File> open(const std::string& url, const char* mode = "r", unsigned connections = 4) {
    Config c;
    c.set_task_size(1 << 20).set_bounce_buffer_size(256 << 10).set_threads(4);
    RemoteSettings r;
    r.connections = connections;
    r.retry_delay_ms = 1;
    r.retry_max_delay_ms = 2;
    c.set_remote(r);
    detail::OpenOptions o;
    o.gpu = &testing::fake_gpu_platform();
    return detail::open_file(url, mode, c, o);
  }

  // The note the report carries about the object's HTTP work.
  static std::string remote_note(const Report& report) {
    for (const auto& n : report.notes) {
      if (n.find("HTTP requests") != std::string::npos) return n;
    }
    return {};
  }

  std::filesystem::path dir_;
  testing::NginxServer nginx_;
};

TEST_F(RemoteFile, HostRouteReadsAnHttpObjectByteExact) {
  auto f = open(nginx_.url("/weights.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto size = f->size();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, kSize);
  std::vector<std::uint8_t> buf(kSize + 4096, 0xA5);
  auto r = f->pread(buf.data(), kSize + 100000, 12345).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->bytes, kSize - 12345);
  EXPECT_EQ(std::memcmp(buf.data(), testing::pattern(12345, kSize - 12345).data(), kSize - 12345), 0);
  for (std::uint64_t i = kSize - 12345; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xA5) << "byte " << i;
  EXPECT_EQ(r->report.at(Route::host).bytes, kSize - 12345);
  // HEAD, then one GET per task: 5 tasks of 1 MiB from offset 12345.
  EXPECT_THAT(remote_note(r->report), ::testing::HasSubstr("6 HTTP requests, 0 retries"));
}

TEST_F(RemoteFile, RunsRemoteConnectionsTasksAtOnceOnPooledConnections) {
  auto f = open(nginx_.url("/weights.bin"), "r", 3);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> buf(kSize);
  std::string note;
  for (int i = 0; i < 3; ++i) {
    auto r = f->pread(buf.data(), kSize, 0).get();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->bytes, kSize);
    note = remote_note(r->report);  // the object's totals when this request ended
  }
  EXPECT_EQ(std::memcmp(buf.data(), testing::pattern(0, kSize).data(), kSize), 0);
  // 1 HEAD + 3 x 6 tasks; never more connections than remote_connections (plus none: open's is pooled).
  EXPECT_THAT(note, ::testing::HasSubstr("19 HTTP requests"));
  const auto at = note.find(" connections");
  ASSERT_NE(at, std::string::npos) << note;
  const auto start = note.rfind(' ', at - 1);
  EXPECT_LE(std::stoul(note.substr(start + 1, at - start - 1)), 3u) << note;
}

TEST_F(RemoteFile, ReadsEndAtTheObjectsEnd) {
  auto f = open(nginx_.url("/weights.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> buf(4096, 0xA5);
  auto tail = f->pread(buf.data(), 1000, kSize - 10).get();
  ASSERT_TRUE(tail.ok()) << tail.status().to_string();
  EXPECT_EQ(tail->bytes, 10u);
  EXPECT_EQ(std::memcmp(buf.data(), testing::pattern(kSize - 10, 10).data(), 10), 0);
  EXPECT_EQ(buf[10], 0xA5);
  auto past = f->pread(buf.data(), 10, kSize + 5).get();
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->bytes, 0u);
}

// Issue 23, High 3: a server that trickles bytes held a read (and Future::cancel, and close) for good.
TEST_F(RemoteFile, CancelEndsTheTransfersOfATricklingServer) {
  testing::FaultProxy proxy;
  if (auto why = proxy.start(nginx_.port(), dir_ / "proxy"); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(proxy.set("slow:2000"));
  testing::Watchdog watchdog(std::chrono::seconds(30), "a cancelled read from a trickling server");
  auto f = open(proxy.url("/weights.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> buf(kSize);
  Future pending = f->pread(buf.data(), kSize, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(pending.done());
  const auto start = std::chrono::steady_clock::now();
  pending.cancel();
  EXPECT_TRUE(pending.wait_for(std::chrono::seconds(2))) << "the transfers went on after cancel()";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_THAT(pending.get(), testing::StatusIs(ErrorCode::cancelled));
  EXPECT_TRUE(f->close().ok());
}

TEST_F(RemoteFile, ServerWithoutRangesIsReadInOneTaskFromTheStart) {
  testing::FaultProxy proxy;
  if (auto why = proxy.start(nginx_.port(), dir_ / "proxy"); !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(proxy.set("ignore_range", -1, "ANY"));
  auto f = open(proxy.url("/weights.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> buf(kSize + 100, 0xA5);
  auto r = f->pread(buf.data(), kSize + 100, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->bytes, kSize);
  EXPECT_EQ(std::memcmp(buf.data(), testing::pattern(0, kSize).data(), kSize), 0);
  EXPECT_EQ(buf[kSize], 0xA5);
  auto later = f->pread(buf.data(), 100, 10).get();
  EXPECT_THAT(later, testing::StatusIs(ErrorCode::failed_precondition, ::testing::HasSubstr("range requests")));
}

TEST_F(RemoteFile, StagedRouteReadsAnHttpObjectIntoGpuMemoryWithoutCuFile) {
  auto f = open(nginx_.url("/weights.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  void* dev = testing::fake_cuda_alloc_device(kSize + 1);
  std::memset(dev, 0xA5, kSize + 1);
  auto r = f->pread(dev, kSize, 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->bytes, kSize);
  EXPECT_EQ(std::memcmp(dev, testing::pattern(0, kSize).data(), kSize), 0);
  EXPECT_EQ(static_cast<std::uint8_t*>(dev)[kSize], 0xA5);
  EXPECT_EQ(r->report.at(Route::staged).bytes, kSize);
  ASSERT_FALSE(r->report.reasons.empty());
  EXPECT_EQ(r->report.reasons.front().reason, Reason::source_not_a_file);
  EXPECT_EQ(testing::fake_cufile_counters().handle_registers, 0u);
  testing::fake_cuda_free(dev);
}

TEST_F(RemoteFile, WritesAndMissingObjectsAreRefusedNamingTheUrl) {
  auto w = open(nginx_.url("/weights.bin"), "w");
  ASSERT_THAT(w, StatusIs(ferry::ErrorCode::failed_precondition));
  EXPECT_NE(w.status().message().find("remote writes are not supported"), std::string::npos) << w.status().to_string();
  auto missing = open(nginx_.url("/nope.bin"));
  ASSERT_THAT(missing, StatusIs(ErrorCode::not_found));
  EXPECT_NE(missing.status().message().find("/nope.bin"), std::string::npos) << missing.status().to_string();
}

// A child forked after its parent read an object keeps reading it through the File it inherited, while the
// parent goes on reading it too. The parent's pooled connections are the parent's: a child that took one would
// send its requests on the parent's socket, and each would read the other's responses.
TEST_F(RemoteFile, AForkedChildAndItsParentReadThroughOneFileAtOnce) {
  auto f = open(nginx_.url("/weights.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const std::vector<std::uint8_t> want = testing::pattern(0, kSize);
  auto read_all = [&]() -> int {  // 0, or what went wrong
    std::vector<std::uint8_t> buf(kSize);
    for (int i = 0; i < 5; ++i) {
      auto r = f->pread(buf.data(), kSize, 0).get();
      if (!r.ok()) return 3;
      if (r->bytes != kSize || std::memcmp(buf.data(), want.data(), kSize) != 0) return 4;
    }
    return 0;
  };
  ASSERT_EQ(read_all(), 0) << "the parent's reads before the fork (its pool now holds connections)";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(30);
    ::_exit(read_all());
  }
  const int parent = read_all();
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), 0)
      << "the child's reads: 3 failed, 4 wrong bytes, 142 hung";
  EXPECT_EQ(parent, 0) << "the parent's reads beside the child's: 3 failed, 4 wrong bytes";
}

}  // namespace
}  // namespace ferry
