// The cuFile route: tasks go to cuFileRead/cuFileWrite, and cuFile's own statistics, read before and
// after the request, split the operations into nvfs, p2p and cufile-posix (the second decision point,
// made inside cuFile, made visible). In strict mode (require=gds) a request whose statistics show any
// operation off the direct route fails after the I/O, with the counters.
#pragma once

#include <memory>
#include <string>

#include "io/request.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cufile/cufile_driver.hpp"

namespace ferry::detail {

/// A registered cuFile handle, deregistered when the last user lets go.
class GdsFileHandle {
 public:
  GdsFileHandle(const CuFileDriver& driver, CUfileHandle_t handle) : driver_(&driver), handle_(handle) {}
  ~GdsFileHandle() { driver_->deregister_handle(handle_); }
  GdsFileHandle(const GdsFileHandle&) = delete;
  GdsFileHandle& operator=(const GdsFileHandle&) = delete;
  CUfileHandle_t get() const { return handle_; }

 private:
  const CuFileDriver* driver_;
  CUfileHandle_t handle_;
};

struct GdsTarget {
  const CudaApi* cuda = nullptr;
  int device = -1;
  void* base = nullptr;  // the caller's device buffer
  const CuFileDriver* driver = nullptr;
  std::shared_ptr<GdsFileHandle> handle;
  Requirement require = Requirement::none;
  std::string path;
};

std::shared_ptr<TaskSource> make_gds_source(bool is_read, GdsTarget target, Decision decision);

/// Splits `report`'s operations counted under cuFile routes into nvfs / p2p / cufile-posix in proportion
/// to `delta`'s counts for the request's direction, and records `delta` in report.cufile. With no
/// operations in `delta` the provisional route stays and a note says why.
void attribute_by_cufile_stats(Report& report, const CuFileCounters& delta, bool is_read);

}  // namespace ferry::detail
