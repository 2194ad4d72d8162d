// `ferry-bench`: the benchmark harness's program (bench/README.md): options -> plan -> runner -> report. It is a
// program of its own, beside `ferry`, so that the product binary holds none of the harness.
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "cli/support/cleanup_signals.hpp"
#include "cli/support/json_text.hpp"
#include "cli_common.hpp"
#include "ferry/remote.hpp"
#include "ferry_bench/harness.hpp"

namespace ferry::cli {
namespace {

/// The options of `ferry-bench`, kept as text until the plan is made so that errors name the option.
struct BenchOptions {
  std::string file;
  std::string size = "8GiB";
  std::string op = "read";
  std::string pattern = "seq";
  std::string routes;      // empty: all that apply
  std::string baselines = "copy,pread,naive";
  std::string threads;     // empty: Ferry's default
  std::string task_sizes;  // empty: Ferry's default
  std::string cache = "hot";
  std::string write_io = "both";
  std::string sync = "end";
  std::string direct_io;
  unsigned repeats = 3;
  int cold_repeats = -1;   // -1: as --repeats
  bool verify = false;
  bool overwrite = false;  // --overwrite: bench may write into an existing FILE
  int device = 0;
  bool json = false;
  std::string json_out;
  bool progress = true;
  std::uint64_t seed = 42;
  bool first_read = false;
};

constexpr const char* kBenchFooter = R"(
Measures, in one run against one file: the ceilings (pinned host<->device copy; raw parallel pread/pwrite
into one large pinned host buffer), the naive way (one read of the whole file, then one copy), and Ferry's
routes (staged = compat on, cufile = compat off, host = into host memory, auto = the default compat mode),
so that every number is also a ratio. Each measurement is repeated (median, min, max); Ferry's first,
cold-start run is timed and shown apart. Reads: --cache hot reads from the page cache (the file is read
through first); cold evicts the file before every run (drop_caches as root, else posix_fadvise DONTNEED),
checks with cachestat/mincore that it is gone, and says which. Writes (--op write) overwrite the first
--size bytes of FILE with the same generated data, buffered and/or O_DIRECT, with the --sync policy.
FILE: a missing one is created with generated data (complete, or not at all). An existing one is never
changed without --overwrite: reads measure it as it is (if it is shorter than --size, its size, rounded
down to 4 KiB, and a warning says so); --op write on it is refused. --overwrite lets bench write into it:
the first --size bytes, filled with generated data (--verify of writes also truncates it to --size); bench
says so on stderr first.
Device routes and GPU baselines are skipped, with the reason, where no GPU is usable.
Exit status: 0 measured (targets are reported, not enforced); 1 a measurement failed or the file could not
be prepared; 2 bad command line; 3 --verify found different bytes.)";

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bench::Plan make_plan(const BenchOptions& o) {
  bench::Plan p;
  auto base = default_config();
  if (!base.ok()) throw SettingsError{base.status()};  // exit 1, as for ferry
  p.base_config = *base;
  p.bounce_from_environment = p.base_config.source("bounce_buffer_size") == SettingSource::environment;

  p.size = bench::round_up_4k(parse_size_option(o.size, "--size"));
  if (p.size == 0) throw UsageError{"--size: cannot use \"" + o.size + "\" (the benchmark needs at least one byte)"};
  p.requested_size = p.size;
  p.overwrite = o.overwrite;
  p.path = o.file.empty() ? fmt::format("bench-{}.bin", bench::short_size(p.size)) : o.file;
  p.op = o.op == "write" ? bench::Op::write : bench::Op::read;
  p.pattern = o.pattern == "random" ? bench::Pattern::random : bench::Pattern::seq;
  p.sync = o.sync == "none" ? bench::SyncPolicy::none : bench::SyncPolicy::end;

  for (const auto& r : split_list(o.routes.empty() ? "staged,cufile,host" : o.routes)) {
    if (r != "staged" && r != "cufile" && r != "host" && r != "auto")
      throw UsageError{"--routes: cannot use \"" + r + "\" (expected a list of staged, cufile, host, auto)"};
    if (std::find(p.routes.begin(), p.routes.end(), r) == p.routes.end()) p.routes.push_back(r);
  }
  for (const auto& b : split_list(o.baselines)) {
    std::string name = b == "pread" || b == "pwrite" || b == "io" ? "io" : b;
    if (b == "none") continue;
    if (name != "copy" && name != "io" && name != "naive")
      throw UsageError{"--baselines: cannot use \"" + b + "\" (expected a list of copy, pread, naive, or none)"};
    if (std::find(p.baselines.begin(), p.baselines.end(), name) == p.baselines.end()) p.baselines.push_back(name);
  }
  for (const auto& t : split_list(o.threads)) {
    // The same bounds as FERRY_THREADS and the other commands' --threads.
    Config scratch;
    Status s = scratch.set("threads", t);
    if (!s.ok()) throw UsageError{"--threads: cannot use \"" + t + "\" (expected numbers from 1 to 256, e.g. 4,8,16)"};
    p.threads.push_back(scratch.threads());
  }
  if (p.threads.empty()) p.threads.push_back(p.base_config.threads());
  for (const auto& t : split_list(o.task_sizes)) {
    Config scratch;  // the same bounds as FERRY_TASK_SIZE
    set_option(scratch, "task_size", "--task-size", t);
    p.task_sizes.push_back(scratch.task_size());
  }
  if (p.task_sizes.empty()) p.task_sizes.push_back(p.base_config.task_size());

  if (p.op == bench::Op::read) {
    if (o.cache == "hot" || o.cache == "both") p.conditions.push_back("hot");
    if (o.cache == "cold" || o.cache == "both") p.conditions.push_back("cold");
  } else {
    if (o.write_io == "buffered" || o.write_io == "both") p.conditions.push_back("buffered");
    if (o.write_io == "direct" || o.write_io == "both") p.conditions.push_back("direct");
  }
  if (o.repeats == 0) throw UsageError{"--repeats: cannot use 0 (at least one run is needed)"};
  p.repeats = o.repeats;
  if (o.cold_repeats == 0) throw UsageError{"--cold-repeats: cannot use 0 (at least one run is needed)"};
  p.cold_repeats = o.cold_repeats < 0 ? o.repeats : static_cast<unsigned>(o.cold_repeats);
  p.verify = o.verify;
  p.device = o.device;
  p.progress = o.progress;
  p.seed = o.seed;
  if (o.first_read && o.op != "read") throw UsageError("--first-read measures reads: it needs --op read");
  p.first_read = o.first_read;
  p.direct_io_override = o.direct_io;
  return p;
}

void add_bench_options(CLI::App* b, BenchOptions& o) {
  b->footer(kBenchFooter);
  b->add_option("FILE", o.file, "File to read or write over (default: bench-<size>.bin here; created with generated "
                                "data when missing; an existing file is changed only with --overwrite)")
      ->check(not_empty());
  b->add_option("--size", o.size, "Bytes per run (default 8GiB)")->check(not_empty());
  b->add_flag("--overwrite", o.overwrite, "Allow writing into an existing FILE: required by --op write, and fills a "
                                          "shorter FILE to --size for reads (its contents are lost)");
  b->add_option("--op", o.op, "read or write (default read)")->check(CLI::IsMember({"read", "write"}));
  b->add_option("--pattern", o.pattern, "seq: one request for everything; random: one request per task, shuffled, "
                                        "a bounded number in flight (default seq)")
      ->check(CLI::IsMember({"seq", "random"}));
  b->add_option("--routes", o.routes, "Ferry routes, comma-separated: staged, cufile, host, auto (default "
                                      "staged,cufile,host)")
      ->check(not_empty());
  b->add_option("--baselines", o.baselines, "Baselines: copy, pread (pwrite for writes), naive, or none (default all)")
      ->check(not_empty());
  b->add_option("--threads", o.threads, "Thread counts to sweep, e.g. 4,8,16 (default: Ferry's default)")
      ->check(not_empty());
  b->add_option("--task-size", o.task_sizes, "Task sizes to sweep, e.g. 1MiB,4MiB (default: Ferry's default); the "
                                             "staged route's bounce buffers follow unless FERRY_BOUNCE_BUFFER_SIZE is set")
      ->check(not_empty());
  b->add_option("--cache", o.cache, "Reads: hot (page cache), cold (evicted before each run) or both (default hot)")
      ->check(CLI::IsMember({"hot", "cold", "both"}));
  b->add_option("--write-io", o.write_io, "Writes: buffered, direct (O_DIRECT) or both (default both)")
      ->check(CLI::IsMember({"buffered", "direct", "both"}));
  b->add_option("--sync", o.sync, "Writes: end (one fdatasync inside the timed region) or none (default end)")
      ->check(CLI::IsMember({"end", "none"}));
  b->add_option("--direct-io", o.direct_io, "Reads: Ferry's O_DIRECT policy auto, on, off (default: Ferry's)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  b->add_option("--repeats", o.repeats, "Timed runs per measurement (default 3)");
  b->add_option("--cold-repeats", o.cold_repeats, "Timed runs per cold measurement (default: --repeats)");
  b->add_flag("--verify", o.verify, "Check the bytes of every Ferry measurement (reads: against the file; writes: "
                                    "an extra untimed run into the emptied file, read back)");
  b->add_option("--device", o.device, "GPU ordinal (default 0)")->check(gpu_ordinal("GPU 0"));
  b->add_flag("--json", o.json, "Print one JSON object instead of the table");
  b->add_option("--json-out", o.json_out, "Also write the JSON object to this file")->check(not_empty());
  b->add_flag("--progress,!--no-progress", o.progress, "Progress on stderr (default on)");
  b->add_option("--seed", o.seed, "Seed of the random pattern's order (default 42)");
  b->add_flag("--first-read", o.first_read, "Reads: also each route's first read in a fresh process (spawns "
              "`ferry read` --repeats times; the sample is prepare() + read, the notes break the set-up down)");
}

int run_bench(const BenchOptions& o) {
  bench::Plan plan = make_plan(o);
  install_cleanup_signal_handlers();  // a FILE being created is removed when bench is interrupted
  auto results = bench::run_benchmark(plan);
  if (!results.ok()) return fail(results.status(), exit_status_for(results.status()));
  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out);
    out << json_dump(results->document, 2) << "\n";
    if (!out) {
      return fail(ErrorCode::io_error, fmt::format("could not write \"{}\"", o.json_out), kExitFailure);
    }
  }
  if (o.json) {
    print_json(results->document);
  } else {
    std::cout << results->table;
  }
  if (results->mismatch) return kExitMismatch;
  return results->failed ? kExitFailure : kExitOk;
}

}  // namespace
}  // namespace ferry::cli

int main(int argc, char** argv) {
  using namespace ferry::cli;
  CLI::App app{"ferry-bench: measure reads (or writes) of a file into GPU or host memory against ceilings and "
               "baselines measured in the same run",
               "ferry-bench"};
  BenchOptions options;
  add_bench_options(&app, options);
  return parse_and_run(app, argc, argv, "ferry-bench", "bench", [&] {
    // The benchmark makes and measures a local file: a URL would become a local path named like it.
    if (ferry::remote::is_remote_url(options.file)) {
      return fail(ferry::ErrorCode::invalid_argument,
                  fmt::format("ferry-bench works on local files; \"{}\" is a URL (remote objects are read with "
                              "ferry read)",
                              ferry::remote::display_url(options.file)),
                  kExitUsage);
    }
    return run_bench(options);
  });
}
