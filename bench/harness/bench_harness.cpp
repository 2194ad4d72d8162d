// run_benchmark: the harness's one entry point (ferry_bench/harness.hpp): run the plan, then render it.
#include "ferry_bench/harness.hpp"

#include "bench_report.hpp"
#include "bench_runner.hpp"

namespace ferry::cli::bench {

Result<Results> run_benchmark(const Plan& plan) {
  FERRY_ASSIGN_OR_RETURN(Outcome outcome, run_plan(plan));
  Results r;
  r.document = to_json(outcome);
  r.table = render_table(outcome);
  for (const Measurement& m : outcome.results) {
    if (m.status == "failed") r.failed = true;
    if (m.verify && !m.verify->ok) r.mismatch = true;
  }
  return r;
}

}  // namespace ferry::cli::bench
