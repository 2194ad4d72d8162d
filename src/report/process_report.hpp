// The process's running total of every request's report (ferry::process_report() reads it).
#pragma once

#include "ferry/route.hpp"

namespace ferry::detail {

/// Adds a finished request's report to the process's total. Thread-safe.
void add_to_process_report(const Report& report);

}  // namespace ferry::detail
