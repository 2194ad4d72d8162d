// The exit statuses of Ferry's commands, and the one mapping from a failure to its status: the doctor's report
// gives it, and the commands exit with it (one of the headers of src/ the tools may include). `ferry --help`,
// the README ("Command line") and docs/doctor.md document them; ferry::kDoctorExit* (ferry/doctor.hpp) are
// the same numbers, for the doctor's report.
// Thread safety: constants and a pure function.
#pragma once

#include "ferry/config.hpp"
#include "ferry/status.hpp"

namespace ferry::detail {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;       // the operation failed: missing file, permission, I/O error, no GPU, ...
inline constexpr int kExitUsage = 2;         // bad command line: unknown option, bad size suffix, ...
inline constexpr int kExitMismatch = 3;      // --verify found different bytes
inline constexpr int kExitRouteRefused = 4;  // the required route (--require-gds) is not available

/// What invalid_argument (without an errno) means for a command: a value its command line gave (a malformed
/// URL, a negative GPU ordinal for the doctor), or the content of a file it was given (`ferry load`: a
/// malformed checkpoint), which is a failure like any other.
enum class InvalidArgument { usage, failure };

/// The exit status for a failed operation: kExitUsage for invalid_argument without an errno where
/// `invalid` is InvalidArgument::usage; kExitRouteRefused for failed_precondition when `required` is
/// Requirement::gds (the engine refuses a read or write that cannot take, or did not take, the direct route
/// with failed_precondition, before or after the I/O); kExitFailure for everything else, including a
/// failed_precondition that no requirement explains (a destination that is a FIFO, a file opened read-only).
int exit_status_for(const Status& failure, Requirement required = Requirement::none,
                    InvalidArgument invalid = InvalidArgument::usage);

}  // namespace ferry::detail
