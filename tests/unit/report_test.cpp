// Report: counting, merging, summary/table/JSON, and the per-request, per-File and per-process reports.
#include "ferry/route.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <vector>

#include "engine/task_split.hpp"
#include "ferry/ferry.hpp"
#include "support/test_files.hpp"

using ::testing::ContainsRegex;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace ferry {
namespace {

constexpr std::uint64_t kTask = 64 * 1024;

Config small_config() {
  Config c;
  c.set_task_size(kTask).set_threads(4);
  return c;
}

TEST(Report, EmptyReportSaysSo) {
  Report r;
  EXPECT_EQ(r.total_ops(), 0u);
  EXPECT_EQ(r.total_bytes(), 0u);
  EXPECT_EQ(r.summary(), "0 operations, 0 B");
}

TEST(Report, CountAndMergeKeepOneRowPerRouteReasonAndDetail) {
  Report a;
  a.count(Route::host, Reason::buffer_is_host_memory, "", 100, 10);
  a.count(Route::host, Reason::buffer_is_host_memory, "", 50, 5);
  a.count(Route::staged, Reason::compat_mode_on, "", 4096, 7);
  Report b;
  b.count(Route::host, Reason::buffer_is_host_memory, "", 1, 1);
  b.count(Route::staged, Reason::compat_mode_on, "forced", 1, 1);
  b.add_note("n1");
  b.add_note("n1");
  a.merge(b);
  EXPECT_EQ(a.at(Route::host).ops, 3u);
  EXPECT_EQ(a.at(Route::host).bytes, 151u);
  EXPECT_EQ(a.at(Route::host).nanoseconds, 16u);
  EXPECT_EQ(a.at(Route::staged).ops, 2u);
  EXPECT_EQ(a.total_ops(), 5u);
  ASSERT_EQ(a.reasons.size(), 3u);
  EXPECT_EQ(a.reasons[0].ops, 3u);
  EXPECT_EQ(a.notes, std::vector<std::string>{"n1"});
  EXPECT_THAT(a.summary(), HasSubstr("5 operations"));
  EXPECT_THAT(a.summary(), HasSubstr("host 3"));
  EXPECT_THAT(a.summary(), HasSubstr("staged 2"));
  EXPECT_THAT(a.summary(), HasSubstr("compat mode on: cuFile not used: forced"));
}

TEST(Report, SingleOperationIsSingular) {
  Report r;
  r.count(Route::host, Reason::buffer_is_host_memory, "", 512, 1);
  EXPECT_EQ(r.summary(), "1 operation, 512 B, all host (reason: buffer is host memory)");
}

TEST(Report, MergeAddsIoCountersAndCuFileCounters) {
  Report a, b;
  a.io.eintr_retries = 2;
  b.io.eintr_retries = 3;
  b.io.short_transfers = 1;
  b.cufile = CuFileCounters{};
  b.cufile->posix_reads = 4;
  a.merge(b);
  a.merge(b);
  EXPECT_EQ(a.io.eintr_retries, 8u);
  EXPECT_EQ(a.io.short_transfers, 2u);
  ASSERT_TRUE(a.cufile.has_value());
  EXPECT_EQ(a.cufile->posix_reads, 8u);
}

TEST(Report, ReadReportCountsOneHostOperationPerTask) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 4 * kTask);
  auto file = File::open(path, "r", small_config());
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(4 * kTask);
  auto r = file->pread(buf.data(), buf.size(), 0).get();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Report& rep = r->report;
  EXPECT_EQ(rep.total_ops(), 4u);
  EXPECT_EQ(rep.at(Route::host).ops, 4u);
  EXPECT_EQ(rep.at(Route::host).bytes, 4 * kTask);
  ASSERT_EQ(rep.reasons.size(), 1u);
  EXPECT_EQ(rep.reasons[0].route, Route::host);
  EXPECT_EQ(rep.reasons[0].reason, Reason::buffer_is_host_memory);
  EXPECT_EQ(rep.reasons[0].ops, 4u);
  // The router may add a detail after the reason ("buffer is host memory: host-pageable").
  EXPECT_THAT(rep.summary(), StartsWith("4 operations, 256.00 KiB, all host (reason: buffer is host memory"));
  EXPECT_THAT(rep.summary(), EndsWith(")"));
  EXPECT_THAT(rep.table(), HasSubstr("host"));
  EXPECT_THAT(rep.table(), ContainsRegex("buffer is host memory.* \\(4 ops\\)"));
  EXPECT_THAT(rep.table(), HasSubstr("I/O:"));
  EXPECT_EQ(rep.io.buffered_ops + rep.io.direct_ops, 4u) << "every task is either buffered or O_DIRECT";
}

TEST(Report, UnalignedReadCountsHeadBodyAndTail) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 4 * kTask);
  auto file = File::open(path, "r", small_config());
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(3 * kTask);
  auto r = file->pread(buf.data(), buf.size(), 100).get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->report.total_ops(), detail::split_request(100, 3 * kTask, kTask, 4096).size());
  EXPECT_EQ(r->report.total_ops(), 5u);  // head, three body tasks (the last one page short), tail
}

TEST(Report, JsonParsesWithTheStableKeys) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 2 * kTask);
  auto file = File::open(path, "r", small_config());
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(2 * kTask);
  auto r = file->pread(buf.data(), buf.size(), 0).get();
  ASSERT_TRUE(r.ok());
  auto j = nlohmann::json::parse(r->report.to_json());
  for (const char* key : {"routes", "reasons", "io", "cufile", "notes", "stream_order", "total_ops", "total_bytes"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["total_ops"], 2);
  EXPECT_EQ(j["total_bytes"], 2 * kTask);
  EXPECT_EQ(j["routes"]["host"]["ops"], 2);
  EXPECT_EQ(j["routes"]["host"]["bytes"], 2 * kTask);
  for (const char* route : {"nvfs", "p2p", "cufile-posix", "staged"}) EXPECT_EQ(j["routes"][route]["ops"], 0) << route;
  ASSERT_EQ(j["reasons"].size(), 1u);
  EXPECT_EQ(j["reasons"][0]["route"], "host");
  EXPECT_EQ(j["reasons"][0]["reason"], "buffer_is_host_memory");
  EXPECT_EQ(j["reasons"][0]["text"], "buffer is host memory");
  EXPECT_EQ(j["reasons"][0]["ops"], 2);
  for (const char* key : {"direct_ops", "buffered_ops", "cached_ops", "eintr_retries", "short_transfers",
                          "gathered_ops"}) {
    EXPECT_TRUE(j["io"].contains(key)) << key;
  }
  EXPECT_TRUE(j["cufile"].is_null());
  EXPECT_TRUE(j["notes"].is_array());
}

TEST(Report, FileReportAccumulatesItsRequests) {
  auto dir = testing::test_dir();
  auto path = testing::write_pattern_file(dir / "d.bin", 3 * kTask);
  auto file = File::open(path, "r+", small_config());
  ASSERT_TRUE(file.ok());
  std::vector<std::uint8_t> buf(3 * kTask);
  ASSERT_TRUE(file->pread(buf.data(), 3 * kTask, 0).get().ok());
  ASSERT_TRUE(file->pread(buf.data(), kTask, 0).get().ok());
  ASSERT_TRUE(file->pwrite(buf.data(), 2 * kTask, 0).get().ok());
  Report rep = file->report();
  EXPECT_EQ(rep.total_ops(), 6u);
  EXPECT_EQ(rep.total_bytes(), 6 * kTask);
  EXPECT_THAT(rep.summary(), HasSubstr("6 operations"));
}

TEST(Report, ProcessReportAccumulatesAcrossFilesAndResets) {
  auto dir = testing::test_dir();
  auto p1 = testing::write_pattern_file(dir / "a.bin", 2 * kTask);
  auto p2 = testing::write_pattern_file(dir / "b.bin", 3 * kTask);
  reset_process_report();
  EXPECT_EQ(process_report().total_ops(), 0u);
  std::vector<std::uint8_t> buf(3 * kTask);
  {
    auto a = File::open(p1, "r", small_config());
    auto b = File::open(p2, "r", small_config());
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(a->pread(buf.data(), 2 * kTask, 0).get().ok());
    ASSERT_TRUE(b->pread(buf.data(), 3 * kTask, 0).get().ok());
  }
  Report all = process_report();
  EXPECT_EQ(all.total_ops(), 5u);
  EXPECT_EQ(all.at(Route::host).bytes, 5 * kTask);
  EXPECT_THAT(all.summary(), StartsWith("5 operations, 320.00 KiB, all host (reason: buffer is host memory"));
  reset_process_report();
  EXPECT_EQ(process_report().total_ops(), 0u);
}

TEST(Report, NamesAreTheDocumentedSpellings) {
  EXPECT_STREQ(route_name(Route::cufile_posix), "cufile-posix");
  EXPECT_STREQ(route_name(Route::host), "host");
  EXPECT_STREQ(reason_name(Reason::buffer_is_host_memory), "buffer_is_host_memory");
  EXPECT_STREQ(reason_text(Reason::buffer_is_host_memory), "buffer is host memory");
}

}  // namespace
}  // namespace ferry
