// Statistics of repeated benchmark runs: median, extremes and spread, kept in one small header so that
// tests/unit/bench_stats_test.cpp can check them without building the CLI.
// Thread safety: pure functions on values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ferry::cli::bench {

/// A summary of the samples of one measurement (GiB/s, seconds, CPU seconds, ...).
struct Summary {
  std::size_t count = 0;  // number of samples; 0 means "nothing measured" and every field below is 0
  double median = 0;      // the middle sample; the mean of the two middle ones for an even count
  double min = 0;
  double max = 0;
  /// (max - min) / median, in percent: how far apart the runs were. 0 for a single sample or a 0 median.
  double spread_pct = 0;
};

/// Summarises `samples` (any order). An empty vector gives Summary{} with count 0.
inline Summary summarize(std::vector<double> samples) {
  Summary s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  s.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2.0;
  s.min = samples.front();
  s.max = samples.back();
  s.spread_pct = s.median > 0 ? (s.max - s.min) / s.median * 100.0 : 0.0;
  return s;
}

/// `value / reference`; 0 when there is no reference (so that a missing ceiling never looks like a pass).
inline double ratio(double value, double reference) { return reference > 0 ? value / reference : 0.0; }

}  // namespace ferry::cli::bench
