// The report of `ferry-bench`: the environment it ran in, a table for people and JSON for machines.
// Thread safety: pure functions of an Outcome (gather_environment reads system files and the drivers).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bench_runner.hpp"

namespace ferry::cli::bench {

/// Kernel, CPUs, memory, the file's file system, GPU and driver, cuFile's version, Ferry's version and
/// build type. Never fails: what cannot be found is left empty and its reason kept in the *_status fields.
Environment gather_environment(const Plan& plan);

/// Warnings about the build and environment that make numbers misleading (unoptimised build, ...).
std::vector<std::string> environment_warnings(const Environment& env);

/// The table for people: environment, conditions, one row per measurement, route summaries, targets.
std::string render_table(const Outcome& outcome);

/// Everything as JSON (schema "ferry.bench/1"; keys documented in bench/README.md).
nlohmann::json to_json(const Outcome& outcome);

}  // namespace ferry::cli::bench
