// ferry_bench/harness.hpp: the benchmark harness behind `ferry-bench`, as its command line drives it.
//
// The harness (bench/harness, target ferry_bench_harness) measures, in one process and against one file, the
// ceilings, the naive way and Ferry's routes (bench/README.md). This header is all the program
// (cli/bench_main.cpp) sees of it: the plan the options make, and what a run produced, already rendered.
// Everything else in bench/harness is the harness's own.
// Thread safety: run_benchmark() is called from one thread at a time (it starts and joins its own threads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/ferry.hpp"

namespace ferry::cli::bench {

enum class Op { read, write };
enum class Pattern { seq, random };
enum class SyncPolicy { end, none };  // writes: one fdatasync inside the timed region, or none

/// Everything the command line decided, with defaults filled in.
struct Plan {
  std::string path;             // the file read, or written over
  std::uint64_t size = 0;       // bytes per run (lowered to what an existing, shorter file holds, for reads)
  std::uint64_t requested_size = 0;  // --size as given (rounded up to 4 KiB)
  bool overwrite = false;       // --overwrite: bench may write into an existing FILE it did not create
  Op op = Op::read;
  Pattern pattern = Pattern::seq;
  std::vector<std::string> routes;     // "staged", "cufile", "host", "auto"
  std::vector<std::string> baselines;  // "copy", "io", "naive"
  std::vector<unsigned> threads;       // sweep; never empty
  std::vector<std::uint64_t> task_sizes;  // sweep; never empty
  // Conditions: for reads "hot"/"cold" (page cache), for writes "buffered"/"direct" (O_DIRECT).
  std::vector<std::string> conditions;
  unsigned repeats = 3;       // timed runs per measurement (hot reads, writes)
  unsigned cold_repeats = 3;  // timed runs per measurement with a cold cache
  SyncPolicy sync = SyncPolicy::end;
  bool verify = false;
  int device = 0;
  bool progress = true;
  std::uint64_t seed = 42;  // of the random pattern's permutation
  Config base_config;       // defaults + FERRY_* environment
  std::string direct_io_override;  // reads: "", or auto/on/off for Ferry's runs
  bool bounce_from_environment = false;  // FERRY_BOUNCE_BUFFER_SIZE set: the sweep leaves it alone
  bool first_read = false;  // reads: also each route's first read in fresh processes (bench_first_read.hpp)
};

/// `n` rounded up to a multiple of 4 KiB (what O_DIRECT needs of lengths; Plan sizes are such multiples).
inline std::uint64_t round_up_4k(std::uint64_t n) { return (n + 4095) / 4096 * 4096; }

/// "8GiB", "4MiB", "64KiB" for whole units, else "12345B": sizes in the table, file names and labels.
std::string short_size(std::uint64_t bytes);

/// What one benchmark produced, as `ferry-bench` prints it.
struct Results {
  std::string table;         // for people: environment, conditions, one row per measurement, targets
  nlohmann::json document;   // the same for machines (schema "ferry.bench/1", bench/README.md)
  bool failed = false;        // a measurement failed
  bool mismatch = false;      // --verify found different bytes
};

/// Runs every measurement of `plan`, with progress on stderr when `plan.progress`. Never fails for I/O
/// problems: those are measurements with status "failed" and a reason. Errors: only setting up the file or host
/// memory (the benchmark cannot start).
[[nodiscard]] Result<Results> run_benchmark(const Plan& plan);

}  // namespace ferry::cli::bench
