// uring_read_all: submit a batch of reads on this thread's ring, reap them all.
#include "source/uring_batch.hpp"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "ferry_build_config.hpp"

#if FERRY_HAVE_IO_URING
#include <liburing.h>
#endif

namespace ferry::detail {

#if FERRY_HAVE_IO_URING
namespace {

class ThreadRing {
 public:
  ThreadRing() { setup_errno_ = -io_uring_queue_init(kUringDepth, &ring_, 0); }
  ~ThreadRing() {
    if (setup_errno_ == 0) io_uring_queue_exit(&ring_);
  }
  ThreadRing(const ThreadRing&) = delete;
  ThreadRing& operator=(const ThreadRing&) = delete;
  int setup_errno() const { return setup_errno_; }
  io_uring* ring() { return &ring_; }

 private:
  io_uring ring_{};
  int setup_errno_ = 0;
};

}  // namespace

Status uring_read_all(std::span<UringRead> reads) {
  thread_local ThreadRing ring;
  if (ring.setup_errno() != 0) {
    return Status(ErrorCode::unavailable,
                  fmt::format("io_uring is not available here (io_uring_queue_init: {})", errno_name(ring.setup_errno())),
                  ring.setup_errno());
  }
  if (reads.size() > kUringDepth) {
    return Status(ErrorCode::internal, fmt::format("{} reads in one io_uring batch (at most {})", reads.size(), kUringDepth));
  }
  io_uring* r = ring.ring();
  for (std::size_t i = 0; i < reads.size(); ++i) {
    io_uring_sqe* sqe = io_uring_get_sqe(r);  // the ring is empty between batches: never null here
    io_uring_prep_read(sqe, reads[i].fd, reads[i].dst, reads[i].length, reads[i].offset);
    io_uring_sqe_set_data64(sqe, i);
  }
  std::size_t submitted = 0;
  while (submitted < reads.size()) {
    int n = io_uring_submit(r);
    if (n == -EINTR || n == -EAGAIN) continue;
    if (n < 0) {
      // Nothing was taken by the kernel: every read is still the caller's to do.
      return Status(ErrorCode::unavailable, fmt::format("io_uring_submit: {}", errno_name(-n)), -n);
    }
    submitted += static_cast<std::size_t>(n);
  }
  for (std::size_t done = 0; done < reads.size();) {
    io_uring_cqe* cqe = nullptr;
    int rc = io_uring_wait_cqe(r, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) return Status(ErrorCode::io_error, fmt::format("io_uring_wait_cqe: {}", errno_name(-rc)), -rc);
    reads[io_uring_cqe_get_data64(cqe)].result = cqe->res;
    io_uring_cqe_seen(r, cqe);
    ++done;
  }
  return Status();
}

#else

Status uring_read_all(std::span<UringRead> /*reads*/) {
  return Status(ErrorCode::unavailable, "Ferry was built without liburing (Debian: liburing-dev)");
}

#endif

}  // namespace ferry::detail
