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
  ThreadRing() { init(); }
  ~ThreadRing() {
    if (setup_errno_ == 0) io_uring_queue_exit(&ring_);
  }
  ThreadRing(const ThreadRing&) = delete;
  ThreadRing& operator=(const ThreadRing&) = delete;
  int setup_errno() const { return setup_errno_; }
  io_uring* ring() { return &ring_; }
  // A ring a submission failed on may still hold prepared reads (into buffers that are about to be freed):
  // a new one, so that no later batch submits them.
  void renew() {
    if (setup_errno_ == 0) io_uring_queue_exit(&ring_);
    ring_ = io_uring{};
    init();
  }

 private:
  void init() { setup_errno_ = -io_uring_queue_init(kUringDepth, &ring_, 0); }
  io_uring ring_{};
  int setup_errno_ = 0;
};

// Submits what is prepared, retrying interruptions. Returns the count taken or -errno.
int submit_prepared(io_uring* r) {
  for (;;) {
    int n = io_uring_submit(r);
    if (n != -EINTR && n != -EAGAIN) return n;
  }
}

}  // namespace

Status uring_read_all(std::span<UringRead> reads) {
  thread_local ThreadRing ring;
  if (ring.setup_errno() != 0) {
    return Status(ErrorCode::unavailable,
                  fmt::format("io_uring is not available here (io_uring_queue_init: {})", errno_name(ring.setup_errno())),
                  ring.setup_errno());
  }
  if (reads.empty()) return Status();
  io_uring* r = ring.ring();
  std::size_t next = 0, in_flight = 0;
  bool broken = false;  // a submission was refused: the ring may hold prepared reads, and is renewed at the end
  // Prepares reads until kUringDepth are in flight (what is not in flight is reaped: a sqe is always free).
  auto prepare = [&] {
    std::size_t prepared = 0;
    for (; in_flight + prepared < kUringDepth && next < reads.size(); ++next, ++prepared) {
      io_uring_sqe* sqe = io_uring_get_sqe(r);
      io_uring_prep_read(sqe, reads[next].fd, reads[next].dst, reads[next].length, reads[next].offset);
      if (reads[next].nowait) sqe->rw_flags = RWF_NOWAIT;
      io_uring_sqe_set_data64(sqe, next);
    }
    return prepared;
  };
  // Submits what prepare() made. The kernel takes a prefix; the reads it did not take, and those never
  // prepared, are left to the caller with the kernel's error. Returns the count taken, or -errno.
  auto submit = [&](std::size_t prepared) {
    const int n = submit_prepared(r);
    const std::size_t taken = n > 0 ? static_cast<std::size_t>(n) : 0;
    in_flight += taken;
    if (taken < prepared) {
      const int error = n < 0 ? -n : EAGAIN;
      for (std::size_t i = next - prepared + taken; i < reads.size(); ++i) reads[i].result = -error;
      next = reads.size();
      broken = true;
    }
    return n;
  };
  if (const int n = submit(prepare()); n <= 0) {
    ring.renew();
    return Status(ErrorCode::unavailable, fmt::format("io_uring_submit: {}", errno_name(n < 0 ? -n : EAGAIN)),
                  n < 0 ? -n : EAGAIN);
  }
  while (in_flight > 0) {
    io_uring_cqe* cqe = nullptr;
    int rc = io_uring_wait_cqe(r, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) return Status(ErrorCode::io_error, fmt::format("io_uring_wait_cqe: {}", errno_name(-rc)), -rc);
    reads[io_uring_cqe_get_data64(cqe)].result = cqe->res;
    io_uring_cqe_seen(r, cqe);
    --in_flight;
    if (next < reads.size()) (void)submit(prepare());
  }
  if (broken) ring.renew();
  return Status();
}

#else

Status uring_read_all(std::span<UringRead> /*reads*/) {
  return Status(ErrorCode::unavailable, "Ferry was built without liburing (Debian: liburing-dev)");
}

#endif

}  // namespace ferry::detail
