// Choosing a request's route and building its backend: see file/route_selection.hpp.
#include "file/route_selection.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "backends/gds_backend.hpp"
#include "backends/host_backend.hpp"
#include "backends/staged_backend.hpp"
#include "backends/staging_pool.hpp"
#include "engine/thread_pool.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/cufile/cufile_driver.hpp"
#include "platform/cufile/cufile_env.hpp"
#include "platform/gpu_platform.hpp"

namespace ferry::detail {

struct GdsFileState {
  CuFileFacts facts;
  const CuFileDriver* driver = nullptr;
  std::shared_ptr<GdsFileHandle> handle;
};

namespace {

// Loads cuFile, opens its driver and registers this file, each once; later requests reuse the outcome.
std::shared_ptr<GdsFileState> cufile_state(FileState& file, const GpuPlatform& gpu) {
  std::lock_guard<std::mutex> lock(file.gds_mutex);
  if (file.gds) return file.gds;
  auto state = std::make_shared<GdsFileState>();
  Status why;
  const CuFileApi* api = gpu.cufile(&why);
  state->facts.forced_compat = cufile_forced_compat(nullptr).forced;  // until cuFile can say (below)
  if (api == nullptr) {
    state->facts.library = why.ok() ? Status(ErrorCode::unavailable, "libcufile could not be loaded") : why;
  } else if (auto driver = CuFileDriver::open(*api); !driver.ok()) {
    state->facts.driver = driver.status();
  } else {
    state->driver = *driver;
    state->facts.forced_compat = cufile_forced_compat(api).forced;
    state->facts.nvidia_fs_loaded = state->driver->properties().nvidia_fs_loaded;
    state->facts.p2pdma_supported = state->driver->properties().p2pdma_supported;
    // route_for() asks for cuFile only for sources that are local files.
    auto handle = state->driver->register_handle(file.source->local_file()->cufile_fd(), file.path);
    if (handle.ok()) {
      state->handle = std::make_shared<GdsFileHandle>(*state->driver, *handle);
    } else {
      state->facts.handle = handle.status();
    }
  }
  file.gds = state;
  return state;
}

}  // namespace

Result<RoutePlanDetail> route_for(FileState& file, const void* buffer, std::uint64_t size,
                                  BufferQuery query, bool pieces) {
  const GpuPlatform& gpu = file.gpu ? *file.gpu : process_gpu_platform();
  RoutePlanDetail plan;
  // No CUDA driver in the process: the buffer is host memory (a null table), and loading the driver to hear
  // so would be most of a fresh process's first read into host memory.
  Status why_no_cuda;
  if (!gpu.cuda_loaded || gpu.cuda_loaded()) plan.cuda = gpu.cuda(&why_no_cuda);
  if (auto known = query == BufferQuery::ask ? file.allocation_in_flight(plan.cuda, buffer, size) : std::nullopt) {
    plan.buffer = *known;
  } else {
    FERRY_ASSIGN_OR_RETURN(plan.buffer, classify_buffer(plan.cuda, buffer, query == BufferQuery::stand_in ? 0 : size));
  }

  RouteQuery q;
  CuFileFacts facts;  // what the router is told about cuFile (needs_cufile() requests only)
  q.buffer = plan.buffer;
  q.size = size;
  q.compat = file.config.compat_mode();
  q.gds_threshold = file.config.gds_threshold();
  q.require = file.config.require();
  q.path = file.path;
  q.pieces = pieces;
  if (needs_cufile(q)) {
    // `auto` opens cuFile only where it could move data directly: elsewhere cuFile's driver start (the
    // bulk of a fresh process's first read) buys nothing, and the platform checks say so just as well.
    DirectRouteHint hint;
    if (q.compat == CompatMode::automatic && q.require != Requirement::gds && gpu.direct_route_hint) {
      hint = gpu.direct_route_hint();
    }
    if (!file.source->local_file()) {
      facts.source_without_descriptor = true;  // cuFile registers descriptors: nothing to load
    } else if (!hint.maybe_direct) {
      facts.checked_without_cufile = hint.evidence;
      facts.forced_compat = cufile_forced_compat(nullptr).forced;
    } else {
      plan.gds = cufile_state(file, gpu);
      facts = plan.gds->facts;
    }
  }
  FERRY_ASSIGN_OR_RETURN(plan.decision, decide(q, facts));
  return plan;
}

namespace {

StagedTarget staged_target(const FileState& file, const RoutePlanDetail& plan, Destination destination,
                           std::uint64_t size) {
  StagedTarget target;
  target.ramp = size >= kRampFromBytes;
  target.api = plan.cuda;
  target.device = plan.buffer.device;
  target.destination = std::move(destination);
  target.bounce_buffer_size = file.config.bounce_buffer_size();
  target.buffers_per_worker = file.config.bounce_buffers_per_thread();
  return target;
}

}  // namespace

Result<std::shared_ptr<RouteBackend>> make_route_backend(FileState& file, const SourceRequest& request,
                                                         RoutePlanDetail plan, const Destination& destination,
                                                         std::uint64_t size, std::span<const Task> tasks) {
  Decision& decision = plan.decision;
  Source* source = file.source.get();
  if (decision.route == Route::host) return make_host_backend(source, request, destination, std::move(decision));
  if (decision.route == Route::staged) {
    return make_staged_backend(source, request, staged_target(file, plan, destination, size), std::move(decision));
  }
  GdsTarget target;
  target.cuda = plan.cuda;
  target.device = plan.buffer.device;
  target.destination = destination;
  target.driver = plan.gds->driver;
  target.handle = plan.gds->handle;
  target.require = file.config.require();
  target.path = file.path;
  std::shared_ptr<RouteBackend> edges;
  // Unaligned edges go through a bounce buffer, which a worker takes when it is made (a read without them
  // keeps the pinned budget free).
  if (is_read(request.direction) && std::any_of(tasks.begin(), tasks.end(), [](const Task& t) { return !t.aligned; })) {
    edges = make_staged_backend(source, request, staged_target(file, plan, destination, 0),
                                Decision{Route::staged, Reason::cufile_unaligned_edge, ""}, /*shared=*/false);
  }
  return make_gds_backend(request, std::move(target), std::move(decision), std::move(edges));
}

namespace {

// Pins the staging kits `config` gives each of `threads` workers on GPU `device`, in its context; the caller's
// thread's context is left as it was.
Status reserve_staging(const CudaApi& api, int device, const Config& config, unsigned threads) {
  ScopedDeviceContext context(api, device);
  FERRY_RETURN_IF_ERROR(context.status());
  return process_staging_pool().reserve({&api, device, config.bounce_buffer_size()},
                                        config.bounce_buffers_per_thread(), threads);
}

}  // namespace

Result<RoutePlanDetail> prepare_route(FileState& file, const void* buffer, std::uint64_t size) {
  FERRY_ASSIGN_OR_RETURN(RoutePlanDetail plan, route_for(file, buffer, size));
  if (plan.decision.route == Route::staged) {
    FERRY_RETURN_IF_ERROR(reserve_staging(*plan.cuda, plan.buffer.device, file.config, file.config.threads()));
  }
  return plan;
}

Status warm_up(const CudaApi& api, int device, const Config& config) {
  const unsigned threads = std::max(1u, config.threads());
  shared_pool().ensure_workers(threads);
  return reserve_staging(api, device, config, threads);
}

}  // namespace ferry::detail

ferry::Status ferry::warm_up(int device, const Config& config) {
  const detail::CudaApi* api = detail::process_cuda_api();
  if (api == nullptr) {
    return Status(ErrorCode::unavailable,
                  fmt::format("cannot warm up GPU {}: {}", device, detail::process_cuda_status().message()));
  }
  return detail::warm_up(*api, device, config);
}
