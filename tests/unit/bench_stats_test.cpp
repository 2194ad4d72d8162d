// The statistics of `ferry-bench` (bench/harness/bench_stats.hpp): median, extremes, spread, rates and ratios.
#include <gtest/gtest.h>

#include "../../bench/harness/bench_stats.hpp"
#include "base/timing.hpp"

namespace ferry::cli::bench {
namespace {

TEST(BenchStats, EmptyIsNothingMeasured) {
  Summary s = summarize({});
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.median, 0.0);
  EXPECT_EQ(s.spread_pct, 0.0);
}

TEST(BenchStats, OneSampleHasNoSpread) {
  Summary s = summarize({4.0});
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.median, 4.0);
  EXPECT_EQ(s.min, 4.0);
  EXPECT_EQ(s.max, 4.0);
  EXPECT_EQ(s.spread_pct, 0.0);
}

TEST(BenchStats, OddCountTakesTheMiddleOfTheSortedSamples) {
  Summary s = summarize({9.0, 1.0, 5.0});
  EXPECT_EQ(s.median, 5.0);
  EXPECT_EQ(s.min, 1.0);
  EXPECT_EQ(s.max, 9.0);
  EXPECT_DOUBLE_EQ(s.spread_pct, 160.0);  // (9 - 1) / 5
}

TEST(BenchStats, EvenCountAveragesTheTwoMiddleSamples) {
  Summary s = summarize({4.0, 1.0, 3.0, 10.0});
  EXPECT_DOUBLE_EQ(s.median, 3.5);
  EXPECT_EQ(s.count, 4u);
}

TEST(BenchStats, AnOutlierMovesTheExtremesButNotTheMedian) {
  Summary s = summarize({50.0, 51.0, 49.0, 50.5, 2.0});
  EXPECT_EQ(s.median, 50.0);
  EXPECT_EQ(s.min, 2.0);
}

TEST(BenchStats, ZeroMedianGivesZeroSpread) {
  EXPECT_EQ(summarize({0.0, 0.0, 1.0}).spread_pct, 0.0);
}

TEST(BenchStats, RateIsGibibytesPerSecond) {
  EXPECT_DOUBLE_EQ(detail::gib_per_s(8ull << 30, 2.0), 4.0);
  EXPECT_EQ(detail::gib_per_s(1, 0.0), 0.0);
}

TEST(BenchStats, RatioWithoutAReferenceIsZeroNotAPass) {
  EXPECT_DOUBLE_EQ(ratio(45.0, 50.0), 0.9);
  EXPECT_EQ(ratio(45.0, 0.0), 0.0);
}

}  // namespace
}  // namespace ferry::cli::bench
