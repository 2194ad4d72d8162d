// `ferry load`: a safetensors checkpoint (file, sharded index, or directory) into GPU or host memory through
// ferry::safetensors; lists the tensors, the throughput and the route report. See docs/load.md.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli_common.hpp"

namespace ferry::cli {

struct LoadCommandOptions {
  CommonOptions common;
  std::string path;
  std::string replicas;     // "1,2": further GPUs that each get a whole copy
  std::string max_request;  // the largest single read, e.g. 1GiB
  bool verify = false;
};

/// Adds `load` to `app`.
CLI::App* add_load_command(CLI::App& app, LoadCommandOptions& o);

/// Loads and prints; returns the exit status: 0 loaded; 1 failed (missing file, malformed checkpoint, I/O
/// error, no GPU); 2 bad command line; 3 --verify found different bytes; 4 --require-gds refused.
int run_load(const LoadCommandOptions& o);

}  // namespace ferry::cli
