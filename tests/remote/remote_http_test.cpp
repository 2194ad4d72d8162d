// remote::Object (one range request per call, with retries) against nginx on loopback, and against the
// fault-injecting proxy in front of it: every fault the layer promises to handle (5xx, resets, truncated
// bodies, wrong or missing Content-Range, no range support, an object that changes during the read, 403,
// 404) on a real HTTP stack. remote_file_test.cpp reads through ferry::File, the engine's parallel tasks.
#include <cstring>
#include <filesystem>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "remote/object.hpp"
#include "remote/servers.hpp"
#include "support/test_files.hpp"

namespace {

using ferry::ErrorCode;
using ferry::RemoteSettings;
using ferry::detail::remote::Object;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kPart = 256 << 10;
constexpr std::uint64_t kSize = 3 * (1 << 20) + 12345;  // not a whole number of parts
constexpr std::uint8_t kGuard = 0xAB;

class RemoteHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ferry::testing::test_dir();
    std::filesystem::create_directories(dir_ / "root" / "private");
    ferry::testing::write_pattern_file(dir_ / "root" / "obj.bin", kSize);
    ferry::testing::write_pattern_file(dir_ / "root" / "private" / "secret.bin", 100);
    ferry::testing::write_pattern_file(dir_ / "root" / "empty.bin", 0);
    if (auto why = nginx_.start(dir_ / "root", dir_ / "nginx"); !why.empty()) GTEST_SKIP() << why;
    settings_.retry_delay_ms = 1;
    settings_.retry_max_delay_ms = 4;
    settings_.max_retries = 4;
  }

  ferry::Result<std::unique_ptr<Object>> open(const std::string& url, const char* mode = "r") {
    return Object::open(url, mode, settings_);
  }

  // Starts the fault proxy in front of nginx; the test skips without python3.
  bool start_proxy() {
    if (auto why = proxy_.start(nginx_.port(), dir_ / "proxy"); !why.empty()) {
      skip_reason_ = why;
      return false;
    }
    return true;
  }

  // Reads [offset, offset + size) part by part, as the engine's tasks would (one read_range each), into a
  // buffer with guard bytes after it; checks the bytes and the guards.
  void expect_read(Object& o, std::uint64_t offset, std::uint64_t size, std::uint64_t part = kPart) {
    std::vector<std::uint8_t> buf(size + 4096, kGuard);
    const std::uint64_t expected = offset >= o.size() ? 0 : std::min(size, o.size() - offset);
    for (std::uint64_t at = 0; at < expected; at += part) {
      const std::uint64_t n = std::min(part, expected - at);
      auto got = o.read_range(reinterpret_cast<char*>(buf.data()) + at, n, offset + at, nullptr);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_EQ(*got, n);
    }
    EXPECT_EQ(std::memcmp(buf.data(), ferry::testing::pattern(offset, expected).data(), expected), 0);
    for (std::uint64_t i = expected; i < buf.size(); ++i) ASSERT_EQ(buf[i], kGuard) << "byte " << i << " past the count";
  }

  void touch_changed(const std::string& name) {
    const auto p = dir_ / "root" / name;
    ferry::testing::write_pattern_file(p, kSize);  // same size; nginx's ETag has the mtime in seconds
    std::filesystem::last_write_time(p, std::filesystem::last_write_time(p) + std::chrono::seconds(5));
  }

  std::filesystem::path dir_;
  ferry::testing::NginxServer nginx_;
  ferry::testing::FaultProxy proxy_;
  RemoteSettings settings_;
  std::string skip_reason_;
};

#define START_PROXY_OR_SKIP() \
  if (!start_proxy()) GTEST_SKIP() << skip_reason_

TEST_F(RemoteHttp, ReadsOneRangePerCallOverOnePooledConnection) {
  auto o = open(nginx_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ((*o)->size(), kSize);
  EXPECT_FALSE((*o)->etag().empty());
  EXPECT_TRUE((*o)->ranges_supported());
  expect_read(**o, 0, kSize);
  const auto c = (*o)->counters();
  const std::uint64_t parts = (kSize + kPart - 1) / kPart;
  EXPECT_EQ(c.bytes, kSize);
  EXPECT_EQ(c.requests, 1 + parts);  // HEAD, then one GET per call
  EXPECT_EQ(c.retries, 0u);
  EXPECT_EQ(c.connections, 1u);  // one caller at a time: the pooled connection is kept alive
  expect_read(**o, 1, 1);
  expect_read(**o, kPart - 7, kPart + 100);  // straddles parts, unaligned
  EXPECT_EQ((*o)->counters().connections, 1u);
}

TEST_F(RemoteHttp, EmptyObjectReadsNothing) {
  auto o = open(nginx_.url("/empty.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ((*o)->size(), 0u);
  expect_read(**o, 0, 100);
}

TEST_F(RemoteHttp, NotFoundNamesTheUrl) {
  auto o = open(nginx_.url("/missing.bin"));
  EXPECT_EQ(o.status().code(), ErrorCode::not_found);
  EXPECT_THAT(o.status().message(), HasSubstr("/missing.bin\": HTTP 404"));
  EXPECT_EQ(o.status().path(), nginx_.url("/missing.bin"));
}

TEST_F(RemoteHttp, ForbiddenIsPermissionDenied) {
  auto o = open(nginx_.url("/private/secret.bin"));
  EXPECT_EQ(o.status().code(), ErrorCode::permission_denied);
  EXPECT_THAT(o.status().message(), HasSubstr("HTTP 403"));
}

TEST_F(RemoteHttp, MessagesNeverShowCredentialsOrQuery) {
  const std::string url = "http://someone:hunter2@127.0.0.1:" + std::to_string(nginx_.port()) +
                          "/missing.bin?X-Amz-Signature=cafe&token=sesame";
  auto o = open(url);
  ASSERT_EQ(o.status().code(), ErrorCode::not_found);
  const std::string text = o.status().to_string();
  EXPECT_THAT(text, Not(HasSubstr("hunter2")));
  EXPECT_THAT(text, Not(HasSubstr("someone")));
  EXPECT_THAT(text, Not(HasSubstr("cafe")));
  EXPECT_THAT(text, Not(HasSubstr("sesame")));
  EXPECT_THAT(text, HasSubstr("/missing.bin"));
}

TEST_F(RemoteHttp, WritesAreRefused) {
  auto o = open(nginx_.url("/obj.bin"), "r+");
  EXPECT_EQ(o.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(o.status().message(), HasSubstr("remote writes are not supported yet"));
}

TEST_F(RemoteHttp, ConnectionRefusedIsUnavailableAfterRetries) {
  const int port = ferry::testing::free_port();
  settings_.max_retries = 2;
  auto o = open("http://127.0.0.1:" + std::to_string(port) + "/x.bin");
  EXPECT_EQ(o.status().code(), ErrorCode::unavailable);
  EXPECT_THAT(o.status().message(), HasSubstr("after 2 retries"));
}

TEST_F(RemoteHttp, RetriesServiceUnavailable) {
  START_PROXY_OR_SKIP();
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_TRUE(proxy_.set("status:503", 3));
  expect_read(**o, 0, kSize);
  EXPECT_EQ((*o)->counters().retries, 3u);
}

TEST_F(RemoteHttp, GivesUpAfterMaxRetries) {
  START_PROXY_OR_SKIP();
  settings_.max_retries = 2;
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_TRUE(proxy_.set("status:503", -1));
  std::vector<std::uint8_t> buf(kSize);
  auto got = (*o)->read_range(reinterpret_cast<char*>(buf.data()), kSize, 0, nullptr);
  EXPECT_EQ(got.status().code(), ErrorCode::unavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("HTTP 503"));
  EXPECT_THAT(got.status().message(), HasSubstr("after 2 retries"));
}

TEST_F(RemoteHttp, ResetConnectionsAreRetriedForTheMissingBytesOnly) {
  START_PROXY_OR_SKIP();
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_TRUE(proxy_.set("reset", 2));
  expect_read(**o, 0, kSize);
  EXPECT_EQ((*o)->counters().retries, 2u);
  EXPECT_EQ((*o)->counters().bytes, kSize);  // every byte once, none twice
  // The retries asked for the rest of their part: ranges that start inside a part, not at its start.
  const std::string log = proxy_.log();
  bool resumed = false;
  for (std::size_t at = log.find("bytes="); at != std::string::npos; at = log.find("bytes=", at + 1)) {
    const std::uint64_t start = std::stoull(log.substr(at + 6));
    if (start % kPart != 0) resumed = true;
  }
  EXPECT_TRUE(resumed) << log;
}

TEST_F(RemoteHttp, TruncatedBodiesAreRetried) {
  START_PROXY_OR_SKIP();
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_TRUE(proxy_.set("truncate", 2));
  expect_read(**o, 0, kSize);
  EXPECT_EQ((*o)->counters().retries, 2u);
  EXPECT_EQ((*o)->counters().bytes, kSize);
}

TEST_F(RemoteHttp, AlwaysTruncatedIsAnErrorNamingTheRange) {
  START_PROXY_OR_SKIP();
  settings_.max_retries = 1;
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_TRUE(proxy_.set("truncate", -1));
  std::vector<std::uint8_t> buf(kPart);
  auto got = (*o)->read_range(reinterpret_cast<char*>(buf.data()), kPart, 0, nullptr);
  EXPECT_EQ(got.status().code(), ErrorCode::unavailable);
  EXPECT_THAT(got.status().message(), HasSubstr("bytes at offset"));
  EXPECT_THAT(got.status().message(), HasSubstr("after 1 retries"));
}

TEST_F(RemoteHttp, WrongContentRangeIsRefused) {
  START_PROXY_OR_SKIP();
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_TRUE(proxy_.set("wrong_range", 1));
  std::vector<std::uint8_t> buf(kSize);
  auto got = (*o)->read_range(reinterpret_cast<char*>(buf.data()), kSize, 0, nullptr);
  EXPECT_EQ(got.status().code(), ErrorCode::io_error);
  EXPECT_THAT(got.status().message(), HasSubstr("answered with Content-Range \"bytes "));
  EXPECT_THAT(got.status().message(), HasSubstr("to a request for bytes "));
}

TEST_F(RemoteHttp, MissingContentRangeIsRefused) {
  START_PROXY_OR_SKIP();
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_TRUE(proxy_.set("no_content_range", 1));
  std::vector<std::uint8_t> buf(kSize);
  auto got = (*o)->read_range(reinterpret_cast<char*>(buf.data()), kSize, 0, nullptr);
  EXPECT_EQ(got.status().code(), ErrorCode::io_error);
  EXPECT_THAT(got.status().message(), HasSubstr("206 without a Content-Range"));
}

TEST_F(RemoteHttp, ServerWithoutRangesReadsFromTheStartOverOneConnection) {
  START_PROXY_OR_SKIP();
  ASSERT_TRUE(proxy_.set("ignore_range", -1, "ANY"));
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_FALSE((*o)->ranges_supported());
  EXPECT_EQ((*o)->size(), kSize);
  expect_read(**o, 0, 1000);  // the first 1000 bytes of a 200 answer, then the transfer is stopped
  expect_read(**o, 0, kSize, kSize);
  std::vector<std::uint8_t> buf(100);
  auto got = (*o)->read_range(reinterpret_cast<char*>(buf.data()), 100, 10, nullptr);
  EXPECT_EQ(got.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(got.status().message(), HasSubstr("does not support range requests"));
}

TEST_F(RemoteHttp, ServerThatStartsIgnoringRangesIsRefused) {
  START_PROXY_OR_SKIP();
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_TRUE(proxy_.set("ignore_range", -1));
  std::vector<std::uint8_t> buf(kPart);
  auto got = (*o)->read_range(reinterpret_cast<char*>(buf.data()), kPart, kPart, nullptr);
  EXPECT_EQ(got.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(got.status().message(), HasSubstr("ignored the Range header"));
}

TEST_F(RemoteHttp, HeadRefusedFallsBackToARangedGet) {
  START_PROXY_OR_SKIP();
  ASSERT_TRUE(proxy_.set("status:405", 1, "HEAD"));
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ((*o)->size(), kSize);
  EXPECT_TRUE((*o)->ranges_supported());
  EXPECT_EQ((*o)->counters().requests, 2u);
  expect_read(**o, 100, 1000);
}

TEST_F(RemoteHttp, ObjectChangedDuringTheReadFailsOnIfMatch) {
  auto o = open(nginx_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  touch_changed("obj.bin");
  std::vector<std::uint8_t> buf(kSize);
  auto got = (*o)->read_range(reinterpret_cast<char*>(buf.data()), kSize, 0, nullptr);
  EXPECT_EQ(got.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(got.status().message(), HasSubstr("object changed during the read"));
  EXPECT_THAT(got.status().message(), HasSubstr("HTTP 412"));
}

TEST_F(RemoteHttp, ObjectChangedIsCaughtWhenTheServerIgnoresIfMatch) {
  START_PROXY_OR_SKIP();
  auto o = open(proxy_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  ASSERT_TRUE(proxy_.set("drop_if_match", -1));
  touch_changed("obj.bin");
  std::vector<std::uint8_t> buf(kSize);
  auto got = (*o)->read_range(reinterpret_cast<char*>(buf.data()), kSize, 0, nullptr);
  EXPECT_EQ(got.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(got.status().message(), HasSubstr("its ETag is now"));
}

TEST_F(RemoteHttp, ManyThreadsReadOneObject) {
  auto o = open(nginx_.url("/obj.bin"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::uint64_t off = static_cast<std::uint64_t>(t) * 700001;
      std::vector<std::uint8_t> buf(600000);
      auto got = (*o)->read_range(reinterpret_cast<char*>(buf.data()), buf.size(), off, nullptr);
      if (got.ok() && *got == buf.size() && std::memcmp(buf.data(), ferry::testing::pattern(off, buf.size()).data(), buf.size()) == 0) {
        ++good;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), 4);
  EXPECT_LE((*o)->counters().connections, 4u);
}

}  // namespace
