// Baselines of `ferry-bench`: plain system calls and CUDA driver calls, nothing of Ferry's engine.
#include "bench_baselines.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "cli/support/generated_data.hpp"
#include "cli/support/pieces.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"

namespace ferry::cli::bench {

using detail::cuda_check;
using detail::process_cuda_api;

Result<detail::UniqueFd> open_file(const std::string& path, bool write, bool direct) {
  return detail::open_fd(path, (write ? O_WRONLY : O_RDONLY) | (direct ? O_DIRECT : 0),
                          fmt::format("{}{}", write ? "writing" : "reading", direct ? " with O_DIRECT" : ""));
}

// ---- parallel file I/O ----

std::vector<std::uint64_t> chunk_offsets(std::uint64_t size, std::uint64_t task_size, bool shuffled,
                                         std::uint64_t seed) {
  std::vector<std::uint64_t> offsets;
  if (task_size == 0) return offsets;
  offsets.reserve(static_cast<std::size_t>((size + task_size - 1) / task_size));
  for (std::uint64_t at = 0; at < size; at += task_size) offsets.push_back(at);
  if (shuffled) {
    std::mt19937_64 rng(seed);
    std::shuffle(offsets.begin(), offsets.end(), rng);
  }
  return offsets;
}

namespace {

// One whole chunk: loops over short transfers and EINTR. Returns bytes moved (fewer only at EOF on reads).
Result<std::uint64_t> transfer_chunk(const FileIo& job, std::uint64_t offset) {
  std::uint64_t want = std::min(job.task_size, job.size - offset);
  std::uint64_t length = job.direct ? round_up_4k(want) : want;
  std::uint64_t done = 0;
  while (done < length) {
    std::uint8_t* p = job.buffer + offset + done;
    off_t at = static_cast<off_t>(offset + done);
    ssize_t n = job.write ? ::pwrite(job.fd, p, length - done, at) : ::pread(job.fd, p, length - done, at);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Status::from_errno(errno, fmt::format("Could not {} {} bytes at offset {}{}", job.write ? "write" : "read",
                                                   length - done, offset + done, job.direct ? " (O_DIRECT)" : ""));
    }
    if (n == 0) break;  // end of file
    done += static_cast<std::uint64_t>(n);
    if (job.direct && done % 4096 != 0) break;  // a short O_DIRECT read ends at the end of the file
  }
  return std::min(done, want);
}

}  // namespace

Result<std::uint64_t> parallel_file_io(const FileIo& job) {
  std::atomic<std::uint64_t> moved{0};
  // One piece per chunk: the pieces are the positions in `offsets`.
  auto transfer = [&](std::uint64_t i, std::uint64_t, std::vector<std::uint8_t>&) -> Status {
    FERRY_ASSIGN_OR_RETURN(std::uint64_t n, transfer_chunk(job, (*job.offsets)[i]));
    moved += n;
    return Status();
  };
  FERRY_RETURN_IF_ERROR(for_each_piece(job.offsets->size(), 1, job.threads, transfer));
  return moved.load();
}

// ---- copies ----

Result<CopyEngine> CopyEngine::create(int device, unsigned streams) {
  const detail::CudaApi* api = process_cuda_api();
  if (api == nullptr) return detail::process_cuda_status();
  FERRY_RETURN_IF_ERROR(detail::make_current(*api, device));
  CopyEngine engine(device);
  for (unsigned i = 0; i < streams; ++i) {
    detail::CUstream s = nullptr;
    FERRY_RETURN_IF_ERROR(cuda_check(*api, api->cuStreamCreate(&s, detail::CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    engine.streams_.push_back(s);
  }
  return engine;
}

CopyEngine::CopyEngine(CopyEngine&& o) noexcept : device_(o.device_), streams_(std::move(o.streams_)) {
  o.streams_.clear();
}

CopyEngine::~CopyEngine() {
  if (streams_.empty()) return;
  const detail::CudaApi* api = process_cuda_api();
  if (api == nullptr || !detail::make_current(*api, device_).ok()) return;
  for (void* s : streams_) (void)api->cuStreamDestroy_v2(static_cast<detail::CUstream>(s));
}

Status CopyEngine::run(std::uint8_t* host, void* device_ptr, std::uint64_t size, bool to_device,
                       std::uint64_t chunk) {
  const detail::CudaApi* api = process_cuda_api();
  FERRY_RETURN_IF_ERROR(detail::make_current(*api, device_));
  auto base = static_cast<detail::CUdeviceptr>(reinterpret_cast<std::uintptr_t>(device_ptr));
  std::size_t i = 0;
  for (std::uint64_t at = 0; at < size; at += chunk, ++i) {
    std::uint64_t n = std::min(chunk, size - at);
    auto stream = static_cast<detail::CUstream>(streams_[i % streams_.size()]);
    detail::CUresult r = to_device ? api->cuMemcpyHtoDAsync_v2(base + at, host + at, n, stream)
                           : api->cuMemcpyDtoHAsync_v2(host + at, base + at, n, stream);
    FERRY_RETURN_IF_ERROR(cuda_check(*api, r, to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync"));
  }
  for (void* s : streams_)
    FERRY_RETURN_IF_ERROR(cuda_check(*api, api->cuStreamSynchronize(static_cast<detail::CUstream>(s)), "cuStreamSynchronize"));
  return Status();
}

// ---- the naive way ----

Result<std::uint64_t> naive_read(int fd, std::uint8_t* pageable, std::uint64_t size, int device, void* device_ptr) {
  std::uint64_t done = 0;
  while (done < size) {
    // One read() call for everything left (Linux moves at most about 2 GiB per call; loop for the rest).
    ssize_t n = ::pread(fd, pageable + done, size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, fmt::format("Could not read {} bytes at offset {}", size - done, done));
    }
    if (n == 0) break;
    done += static_cast<std::uint64_t>(n);
  }
  if (device_ptr != nullptr) {
    const detail::CudaApi* api = process_cuda_api();
    FERRY_RETURN_IF_ERROR(detail::make_current(*api, device));
    auto dst = static_cast<detail::CUdeviceptr>(reinterpret_cast<std::uintptr_t>(device_ptr));
    FERRY_RETURN_IF_ERROR(cuda_check(*api, api->cuMemcpyHtoD_v2(dst, pageable, done), "cuMemcpyHtoD"));
  }
  return done;
}

Status naive_write(int fd, std::uint8_t* pageable, std::uint64_t size, int device, const void* device_ptr) {
  if (device_ptr != nullptr) {
    const detail::CudaApi* api = process_cuda_api();
    FERRY_RETURN_IF_ERROR(detail::make_current(*api, device));
    auto src = static_cast<detail::CUdeviceptr>(reinterpret_cast<std::uintptr_t>(device_ptr));
    FERRY_RETURN_IF_ERROR(cuda_check(*api, api->cuMemcpyDtoH_v2(pageable, src, size), "cuMemcpyDtoH"));
  }
  std::uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd, pageable + done, size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, fmt::format("Could not write {} bytes at offset {}", size - done, done));
    }
    done += static_cast<std::uint64_t>(n);
  }
  return Status();
}

// ---- generated data and verification ----

void fill_generated_parallel(std::uint8_t* dst, std::uint64_t size, unsigned threads) {
  auto fill = [&](std::uint64_t at, std::uint64_t length, std::vector<std::uint8_t>&) {
    fill_generated(dst + at, length, at);
    return Status();
  };
  (void)for_each_piece(size, kPieceBytes, threads, fill);
}

}  // namespace ferry::cli::bench
