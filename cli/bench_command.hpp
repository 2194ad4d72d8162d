// `ferry bench`: its command-line options and entry point (registered by main.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace ferry::cli {

/// The options of `ferry bench`, kept as text until the plan is made so that errors name the option.
struct BenchOptions {
  std::string file;
  std::string size = "8GiB";
  std::string op = "read";
  std::string pattern = "seq";
  std::string routes;     // empty: all that apply
  std::string baselines = "copy,pread,naive";
  std::string threads;    // empty: Ferry's default
  std::string task_sizes; // empty: Ferry's default
  std::string cache = "hot";
  std::string write_io = "both";
  std::string sync = "end";
  std::string direct_io;
  unsigned repeats = 3;
  int cold_repeats = -1;  // -1: as --repeats
  bool verify = false;
  bool overwrite = false;  // --overwrite: bench may write into an existing FILE
  int device = 0;
  bool json = false;
  std::string json_out;
  bool progress = true;
  std::uint64_t seed = 42;
  bool first_read = false;
};

/// Adds the `bench` subcommand to `app`, filling `o` when it is parsed.
CLI::App* add_bench_command(CLI::App& app, BenchOptions& o);
/// Runs it. Returns the exit status (see `ferry bench --help`). Throws UsageError for bad options.
int run_bench(const BenchOptions& o);

}  // namespace ferry::cli
