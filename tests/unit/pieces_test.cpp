// for_each_piece (cli/support/pieces.hpp): the tools' pieces of a range, taken in turn by a few threads.
#include "cli/support/pieces.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/status_matchers.hpp"

namespace ferry::cli {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

using Piece = std::pair<std::uint64_t, std::uint64_t>;  // at, length

TEST(ForEachPiece, CoversTheRangeOncePieceByPieceWithAShorterLast) {
  std::mutex mutex;
  std::set<Piece> seen;
  Status s = for_each_piece(10, 4, 3, [&](std::uint64_t at, std::uint64_t length, std::vector<std::uint8_t>&) {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_TRUE(seen.insert({at, length}).second) << "piece at " << at << " twice";
    return Status();
  });
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(seen, (std::set<Piece>{{0, 4}, {4, 4}, {8, 2}}));
}

TEST(ForEachPiece, AnEmptyRangeRunsNothing) {
  std::atomic<int> calls{0};
  Status s = for_each_piece(0, 4, 8, [&](std::uint64_t, std::uint64_t, std::vector<std::uint8_t>&) {
    ++calls;
    return Status();
  });
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(calls.load(), 0);
}

TEST(ForEachPiece, OnePieceRunsOnTheCallersThread) {
  std::thread::id ran_on;
  Status s = for_each_piece(4, 16, 8, [&](std::uint64_t, std::uint64_t, std::vector<std::uint8_t>&) {
    ran_on = std::this_thread::get_id();
    return Status();
  });
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(ForEachPiece, EachThreadKeepsItsBufferFromOnePieceToTheNext) {
  std::atomic<int> fresh{0};
  Status s = for_each_piece(64, 1, 1, [&](std::uint64_t, std::uint64_t, std::vector<std::uint8_t>& buffer) {
    if (buffer.empty()) ++fresh;
    buffer.resize(16);
    return Status();
  });
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(fresh.load(), 1);
}

TEST(ForEachPiece, AFailureStopsNewPiecesAndIsReturned) {
  std::atomic<int> calls{0};
  Status s = for_each_piece(1000, 1, 1, [&](std::uint64_t at, std::uint64_t, std::vector<std::uint8_t>&) {
    ++calls;
    if (at == 2) return Status(ErrorCode::io_error, "piece 2 failed");
    return Status();
  });
  EXPECT_THAT(s, StatusIs(ErrorCode::io_error, HasSubstr("piece 2 failed")));
  EXPECT_EQ(calls.load(), 3);
}

TEST(ForEachPiece, FailuresOnSeveralThreadsAtOnceReturnOneOfThem) {
  Status s = for_each_piece(1000, 1, 4, [&](std::uint64_t at, std::uint64_t, std::vector<std::uint8_t>&) {
    return Status(ErrorCode::io_error, "piece " + std::to_string(at) + " failed");
  });
  EXPECT_THAT(s, StatusIs(ErrorCode::io_error, HasSubstr("failed")));
}

}  // namespace
}  // namespace ferry::cli
