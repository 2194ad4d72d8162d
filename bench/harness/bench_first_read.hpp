// `ferry-bench --first-read`: the first read in a fresh process, per route. Each run spawns the `ferry` beside
// this program (both are built into, and installed in, one directory) as
// `ferry read FILE --size N [--device D --compat X] --json` on the (hot) file and keeps what the
// child measured: File::prepare() (the route's one-time set-up) plus the read, as one sample; the whole
// process's wall time and the one-time set-up step by step (CUDA, context, cuFile, pinned buffers,
// threads) go into the measurement's notes. A model server pays exactly this once per process.
#pragma once

#include <string>

#include "bench_runner.hpp"

namespace ferry::cli::bench {

/// The measurement named `route` ("staged", "cufile", "auto" or "host") in condition "first-read", with
/// `plan.repeats` fresh processes. A failed child makes it "failed", with the child's error as reason.
Measurement measure_first_read(const Plan& plan, const std::string& route);

}  // namespace ferry::cli::bench
