// `ferry-bench`: the results a benchmark produces, and the runner that measures them (the plan is in
// ferry_bench/harness.hpp).
//
// A run of `ferry-bench` measures, in one process and against one file: the ceilings (pinned copy
// bandwidth, raw parallel file I/O into pinned host memory), the naive way, and Ferry's routes, each
// repeated, so that every Ferry number can be given as a ratio of the ceilings measured beside it.
// Thread safety: a Runner is used from one thread (it starts and joins its own I/O threads).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_baselines.hpp"
#include "bench_stats.hpp"
#include "cli/support/file_compare.hpp"
#include "ferry/ferry.hpp"
#include "ferry_bench/harness.hpp"

namespace ferry::cli::bench {


/// One timed run.
struct Sample {
  double seconds = 0;       // wall time of the run, including the sync when the policy has one
  double sync_seconds = 0;  // of which fdatasync (writes)
  double cpu_seconds = 0;   // user + system time of the whole process during the run
  std::uint64_t bytes = 0;
};

/// The outcome of one measurement: a baseline, or a Ferry route with one set of settings, in one condition.
struct Measurement {
  std::string name;       // "staged", "cufile", "host", "auto"; baselines "copy", "pread", "pwrite", "naive"
  std::string kind;       // "ferry" or "baseline"
  std::string target;     // where the data lives in memory: "gpu" or "host"
  std::string condition;  // "hot", "cold", "buffered", "direct"; "" for the copy ceiling
  std::string condition_detail;  // how the condition was made ("drop_caches, verified: 0.0% resident")
  unsigned threads = 0;          // 0: not applicable (naive: one thread; copy: streams in `notes`)
  std::uint64_t task_size = 0;   // bytes per request / chunk; 0 when not applicable
  std::uint64_t bounce_buffer_size = 0;  // staged runs
  std::string direct_io;         // Ferry runs: the direct_io setting used
  bool default_settings = false; // Ferry runs with Ferry's default threads and task size
  std::string status = "ok";     // "ok", "skipped" (the reason says why), "failed" (the reason is the error)
  std::string reason;
  std::vector<Sample> runs;          // the timed repeats
  std::optional<double> setup_seconds;  // Ferry: File::prepare() (cuFile registration, pinned buffers), untimed
  std::string setup_plan;              // Ferry: the route prepare() chose, and why
  std::optional<Sample> first_run;   // Ferry: the cold-start run, timed, kept out of the statistics
  std::optional<Report> report;      // Ferry: routes and reasons of the last timed run
  std::string first_run_summary;     // Ferry: the route summary of the first run
  std::optional<VerifyOutcome> verify;
  std::vector<std::string> notes;

  // Filled in by compute_statistics().
  Summary gib_per_s;
  Summary gib_per_s_before_sync;  // writes with a sync: the rate before fdatasync
  Summary cpu_s_per_gib;
  std::map<std::string, double> ratios;  // "copy", "io", "naive", "cufile" -> median / reference median
};

/// An acceptance target of the issue, checked against this run's results.
struct Target {
  std::string name;       // "hot read, default settings vs pinned H2D copy"
  std::string result;     // which result was measured ("staged hot 16 threads 4MiB")
  std::string reference;  // against what ("copy")
  double want = 0;        // the ratio needed
  double measured = 0;    // the ratio reached
  bool pass = false;
};

/// Facts about the machine and build, for the report.
struct Environment {
  std::string kernel, machine, cpu_model, file_system, device_source, gpu_name, time_utc;
  unsigned cpus = 0;
  std::uint64_t memory_bytes = 0;
  int driver_version = 0;          // cuDriverGetVersion; 0 unknown
  int cufile_version = 0;          // cuFileGetVersion; 0 unknown
  std::string cuda_status;         // "ok" or why not
  std::string cufile_status;       // "ok" or why not
  std::string ferry_version;
  bool optimized = false, ndebug = false;
  bool root = false;
  unsigned default_threads = 0;
  std::uint64_t default_task_size = 0;
};

/// What a benchmark produced.
struct Outcome {
  Plan plan;
  Environment env;
  bool file_created = false;
  std::string cache_check;  // residency probe used: "cachestat", "mincore" or why none
  std::vector<Measurement> results;
  std::vector<Target> targets;
  std::vector<std::string> warnings;
  std::vector<std::string> notes;
  double total_seconds = 0;
};

/// Runs every measurement of `plan`. Never throws for I/O problems: failures become measurements with status
/// "failed" and a reason. Errors: only setting up the file or host memory (the benchmark cannot start).
[[nodiscard]] Result<Outcome> run_plan(const Plan& plan);

/// Medians, spreads, CPU time per GiB and ratios of every result, then the acceptance targets.
void compute_statistics(Outcome& outcome);

}  // namespace ferry::cli::bench
