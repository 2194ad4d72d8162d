// The cuFile route: tasks go to cuFileRead/cuFileWrite, and cuFile's own statistics, read before and
// after the request, split the operations into nvfs, p2p and cufile-posix (the second decision point,
// made inside cuFile, made visible). In strict mode (require=gds) a request whose statistics show any
// operation off the direct route fails after the I/O, with the counters.
#pragma once

#include <memory>
#include <string>

#include "backends/route_backend.hpp"
#include "base/destination.hpp"
#include "ferry/config.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cufile/cufile_driver.hpp"

namespace ferry::detail {

struct GdsTarget {
  const CudaApi* cuda = nullptr;
  int device = -1;
  // The caller's device memory, moved into the backend (RouteBackend::destination). A scattered read's tasks each
  // lie in one of its buffers (cuFile reads into one buffer at a time): FileState::submit_scattered splits them so.
  Destination destination;
  const CuFileDriver* driver = nullptr;
  std::shared_ptr<GdsFileHandle> handle;
  Requirement require = Requirement::none;
  std::string path;
};

/// `edges`: for reads, the staged route for the same buffer, which takes the request's unaligned tasks
/// (cuFile moves whole blocks: docs/routes.md); null for writes.
/// The request's ops are queued on their own (its cuFile statistics are read around them).
std::shared_ptr<RouteBackend> make_gds_backend(const SourceRequest& request, GdsTarget target, Decision decision,
                                               std::shared_ptr<RouteBackend> edges);

}  // namespace ferry::detail
