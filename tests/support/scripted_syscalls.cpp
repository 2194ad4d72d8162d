// ScriptedSyscalls: rule matching, recording, and forwarding.
#include "support/scripted_syscalls.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <thread>

namespace ferry::testing {

const char* op_name(Op op) {
  switch (op) {
    case Op::open: return "open";
    case Op::close: return "close";
    case Op::pread: return "pread";
    case Op::pwrite: return "pwrite";
    case Op::cached_pages: return "cached_pages";
    case Op::fstat: return "fstat";
    case Op::direct_io_alignment: return "direct_io_alignment";
    case Op::fdatasync: return "fdatasync";
    case Op::ftruncate: return "ftruncate";
  }
  return "?";
}

void ScriptedSyscalls::add(Rule rule) {
  std::lock_guard<std::mutex> lock(mutex_);
  rules_.push_back(std::move(rule));
  fired_.push_back(0);
}

std::vector<Call> ScriptedSyscalls::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

std::vector<Call> ScriptedSyscalls::calls(Op op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Call> out;
  std::copy_if(calls_.begin(), calls_.end(), std::back_inserter(out), [op](const Call& c) { return c.op == op; });
  return out;
}

int ScriptedSyscalls::count(Op op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return op_counts_[static_cast<std::size_t>(op)];
}

int ScriptedSyscalls::scripted_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(std::count_if(calls_.begin(), calls_.end(), [](const Call& c) { return c.scripted; }));
}

bool ScriptedSyscalls::is_direct_fd(int fd) const { return direct_fds_.count(fd) != 0; }

ScriptedSyscalls::Matched ScriptedSyscalls::begin(Op op, int fd, std::uint64_t offset, std::uint64_t count,
                                                  int flags, Call& call, bool nowait) {
  std::lock_guard<std::mutex> lock(mutex_);
  int nth = ++op_counts_[static_cast<std::size_t>(op)];
  call.op = op;
  call.fd = fd;
  call.offset = offset;
  call.count = count;
  call.flags = flags;
  call.nowait = nowait;
  call.direct = op == Op::open ? (flags & O_DIRECT) != 0 : is_direct_fd(fd);
  call.started = std::chrono::steady_clock::now();
  Matched m;
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const Rule& r = rules_[i];
    if (std::find(r.ops.begin(), r.ops.end(), op) == r.ops.end()) continue;
    if (r.times >= 0 && fired_[i] >= r.times) continue;
    if (r.nth != 0 && r.nth != nth) continue;
    if (r.direct_only && !call.direct) continue;
    if (r.buffered_only && call.direct) continue;
    if (r.nowait_only && !nowait) continue;
    if (r.covers && !(offset <= *r.covers && *r.covers < offset + count)) continue;
    ++fired_[i];
    m.any = true;
    m.rule = r;
    call.scripted = true;
    break;
  }
  return m;
}

void ScriptedSyscalls::end(Call& call, long long result) {
  call.result = result;
  call.ended = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (call.op == Op::open && result >= 0 && call.direct) direct_fds_.insert(static_cast<int>(result));
  if (call.op == Op::open && result >= 0) call.fd = static_cast<int>(result);
  if (call.op == Op::close && result == 0) direct_fds_.erase(call.fd);
  calls_.push_back(call);
}

namespace {

// What a matched rule does before the call itself: its hook, then its delay.
void prelude(bool matched, const Rule& rule) {
  if (!matched) return;
  if (rule.before) rule.before();
  if (rule.delay.count() > 0) std::this_thread::sleep_for(rule.delay);
}

// The byte count a read/write rule lets through: half (at least one byte), or all.
std::size_t allowed(const Rule& r, std::size_t count) {
  if (!r.half || count <= 1) return count;
  return count / 2;
}

}  // namespace

int ScriptedSyscalls::open(const char* path, int flags, mode_t mode) {
  Call call;
  Matched m = begin(Op::open, -1, 0, 0, flags, call);
  prelude(m.any, m.rule);
  int rc = (m.any && m.rule.error != 0) ? -m.rule.error : base_.open(path, flags, mode);
  end(call, rc);
  return rc;
}

int ScriptedSyscalls::close(int fd) {
  Call call;
  Matched m = begin(Op::close, fd, 0, 0, 0, call);
  int rc = (m.any && m.rule.error != 0) ? -m.rule.error : base_.close(fd);
  end(call, rc);
  return rc;
}


ssize_t ScriptedSyscalls::pread(int fd, void* buf, std::size_t count, off_t offset) {
  return read(fd, buf, count, offset, false);
}

ssize_t ScriptedSyscalls::pread_nowait(int fd, void* buf, std::size_t count, off_t offset) {
  return read(fd, buf, count, offset, true);
}

ssize_t ScriptedSyscalls::read(int fd, void* buf, std::size_t count, off_t offset, bool nowait) {
  Call call;
  Matched m = begin(Op::pread, fd, static_cast<std::uint64_t>(offset), count, 0, call, nowait);
  prelude(m.any, m.rule);
  ssize_t rc;
  if (m.any && m.rule.error != 0) {
    rc = -m.rule.error;
  } else if (m.any && m.rule.eof) {
    rc = 0;
  } else {
    const std::size_t n = m.any ? allowed(m.rule, count) : count;
    rc = nowait ? base_.pread_nowait(fd, buf, n, offset) : base_.pread(fd, buf, n, offset);
  }
  end(call, rc);
  return rc;
}

ssize_t ScriptedSyscalls::pwrite(int fd, const void* buf, std::size_t count, off_t offset) {
  Call call;
  Matched m = begin(Op::pwrite, fd, static_cast<std::uint64_t>(offset), count, 0, call);
  prelude(m.any, m.rule);
  ssize_t rc;
  if (m.any && m.rule.error != 0) {
    rc = -m.rule.error;
  } else {
    rc = (m.any && m.rule.eof) ? 0 : base_.pwrite(fd, buf, m.any ? allowed(m.rule, count) : count, offset);
  }
  end(call, rc);
  return rc;
}

int ScriptedSyscalls::cached_pages(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t* cached,
                                   std::uint64_t* total) {
  Call call;
  Matched m = begin(Op::cached_pages, fd, offset, length, 0, call);
  prelude(m.any, m.rule);
  int rc = (m.any && m.rule.error != 0) ? -m.rule.error : base_.cached_pages(fd, offset, length, cached, total);
  if (rc == 0 && m.any && m.rule.all_cached) *cached = *m.rule.all_cached ? *total : 0;
  if (rc == 0 && m.any && m.rule.half) *cached = *total / 2;
  end(call, rc);
  return rc;
}

int ScriptedSyscalls::fstat(int fd, struct stat* st) {
  Call call;
  Matched m = begin(Op::fstat, fd, 0, 0, 0, call);
  int rc = (m.any && m.rule.error != 0) ? -m.rule.error : base_.fstat(fd, st);
  end(call, rc);
  return rc;
}

int ScriptedSyscalls::direct_io_alignment(int fd, std::uint64_t* offset_align, std::uint64_t* memory_align) {
  Call call;
  Matched m = begin(Op::direct_io_alignment, fd, 0, 0, 0, call);
  int rc = (m.any && m.rule.error != 0) ? -m.rule.error : base_.direct_io_alignment(fd, offset_align, memory_align);
  end(call, rc);
  return rc;
}

int ScriptedSyscalls::fdatasync(int fd) {
  Call call;
  Matched m = begin(Op::fdatasync, fd, 0, 0, 0, call);
  int rc = (m.any && m.rule.error != 0) ? -m.rule.error : base_.fdatasync(fd);
  end(call, rc);
  return rc;
}

int ScriptedSyscalls::ftruncate(int fd, off_t length) {
  Call call;
  Matched m = begin(Op::ftruncate, fd, static_cast<std::uint64_t>(length), 0, 0, call);
  int rc = (m.any && m.rule.error != 0) ? -m.rule.error : base_.ftruncate(fd, length);
  end(call, rc);
  return rc;
}

}  // namespace ferry::testing
