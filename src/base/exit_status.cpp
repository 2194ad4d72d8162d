// From a failure to the command's exit status: see base/exit_status.hpp.
#include "base/exit_status.hpp"

#include "ferry/doctor.hpp"

namespace ferry::detail {

static_assert(kExitOk == kDoctorExitOk && kExitFailure == kDoctorExitFailure &&
                  kExitRouteRefused == kDoctorExitRouteRefused,
              "the doctor's exit statuses are the commands' own");

int exit_status_for(const Status& failure, Requirement required, InvalidArgument invalid) {
  if (failure.code() == ErrorCode::invalid_argument && failure.sys_errno() == 0 && invalid == InvalidArgument::usage)
    return kExitUsage;
  if (failure.code() == ErrorCode::failed_precondition && required == Requirement::gds) return kExitRouteRefused;
  return kExitFailure;
}

}  // namespace ferry::detail
