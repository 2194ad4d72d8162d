// ScriptedSyscalls: a Syscalls wrapper (LevelDB EnvWrapper style) that forwards every call to another
// Syscalls (the real ones by default) except where a script rule says otherwise, and records every call
// it sees with its start and end times.
//
//   ScriptedSyscalls sys;
//   sys.add(Rule::on(Op::pread).nth_call(2).returns_half());     // 2nd pread returns half
//   sys.add(Rule::on(Op::pread).fail(EINTR).limit(3));           // EINTR x3
//   sys.add(Rule::on_io().covering(1 << 20).fail(EIO));          // EIO at file offset 1 MiB
//   sys.add(Rule::on(Op::open).only_direct().fail(EINVAL));      // file system refuses O_DIRECT
//   sys.add(Rule::on(Op::pread).only_nowait().fail(EAGAIN));     // nothing is in the page cache
//   auto file = detail::open_file(path, "r", config, detail::OpenOptions{.syscalls = &sys});
//
// Rules are checked in the order they were added; the first that matches a call decides it. A rule with a
// `times` budget stops matching once spent. Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "source/syscalls.hpp"

namespace ferry::testing {

enum class Op { open, close, pread, pwrite, cached_pages, fstat, direct_io_alignment, fdatasync, ftruncate };
const char* op_name(Op op);

/// One scripted behaviour: which calls it matches, and what it does to them.
struct Rule {
  // ---- matching ----
  std::vector<Op> ops;                     // empty: never matches
  std::optional<std::uint64_t> covers;     // the call's byte range [offset, offset + count) holds this offset
  int nth = 0;                             // only the nth call of its op (1-based, counted by the wrapper)
  int times = -1;                          // fires at most this often; -1: always
  bool direct_only = false;                // open: only with O_DIRECT; I/O: only on an O_DIRECT descriptor
  bool buffered_only = false;              // I/O: only on a buffered descriptor
  bool nowait_only = false;                // pread: only reads that must not wait (pread_nowait)
  // ---- action ----
  int error = 0;                           // return -error without calling through
  bool half = false;                       // transfer only half of the bytes asked (at least 1)
  bool eof = false;                        // return 0: reads as at the end of the file, writes as no progress
  std::chrono::milliseconds delay{0};      // sleep first (then call through unless another action says)
  std::function<void()> before;            // runs first, outside the wrapper's lock (e.g. truncate the file)
  std::optional<bool> all_cached;          // cached_pages: answer "all cached" (true) or "none" (false)

  static Rule on(Op op) { Rule r; r.ops = {op}; return r; }
  /// Every call that moves bytes: pread, pwrite.
  static Rule on_io() { Rule r; r.ops = {Op::pread, Op::pwrite}; return r; }
  Rule& covering(std::uint64_t offset) { covers = offset; return *this; }
  Rule& nth_call(int n) { nth = n; return *this; }
  Rule& limit(int n) { times = n; return *this; }
  Rule& only_direct() { direct_only = true; return *this; }
  Rule& only_buffered() { buffered_only = true; return *this; }
  Rule& only_nowait() { nowait_only = true; return *this; }
  Rule& fail(int e) { error = e; return *this; }
  Rule& returns_half() { half = true; return *this; }  // cached_pages: half the pages cached
  Rule& reports_cached(bool all) { all_cached = all; return *this; }
  Rule& returns_eof() { eof = true; return *this; }
  Rule& sleeps(std::chrono::milliseconds d) { delay = d; return *this; }
  Rule& runs_first(std::function<void()> f) { before = std::move(f); return *this; }
};

/// What the wrapper saw.
struct Call {
  Op op;
  int fd = -1;                 // open: the descriptor returned (or -1)
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
  int flags = 0;               // open: open flags
  bool direct = false;         // open with O_DIRECT, or I/O on an O_DIRECT descriptor
  bool nowait = false;         // pread: pread_nowait (RWF_NOWAIT), recorded and scripted as a pread
  bool scripted = false;       // a rule changed this call
  long long result = 0;        // what the caller got back
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point ended;
};

class ScriptedSyscalls final : public detail::Syscalls {
 public:
  explicit ScriptedSyscalls(detail::Syscalls& base = detail::real_syscalls()) : base_(base) {}

  void add(Rule rule);
  /// Every call so far, in the order they ended.
  std::vector<Call> calls() const;
  std::vector<Call> calls(Op op) const;
  /// How many calls of `op` started so far.
  int count(Op op) const;
  /// How many calls a rule changed.
  int scripted_count() const;

  int open(const char* path, int flags, mode_t mode) override;
  int close(int fd) override;
  ssize_t pread(int fd, void* buf, std::size_t count, off_t offset) override;
  ssize_t pwrite(int fd, const void* buf, std::size_t count, off_t offset) override;
  ssize_t pread_nowait(int fd, void* buf, std::size_t count, off_t offset) override;
  int cached_pages(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t* cached,
                   std::uint64_t* total) override;
  int fstat(int fd, struct stat* st) override;
  off_t seek_end(int fd) override { return base_.seek_end(fd); }
  int clear_nonblocking(int fd) override { return base_.clear_nonblocking(fd); }
  int direct_io_alignment(int fd, std::uint64_t* offset_align, std::uint64_t* memory_align) override;
  int fdatasync(int fd) override;
  int ftruncate(int fd, off_t length) override;

 private:
  struct Matched {
    bool any = false;
    Rule rule;
  };
  // Counts the call, finds the deciding rule (spending its budget) and fills `call`'s identity.
  Matched begin(Op op, int fd, std::uint64_t offset, std::uint64_t count, int flags, Call& call,
                bool nowait = false);
  ssize_t read(int fd, void* buf, std::size_t count, off_t offset, bool nowait);
  void end(Call& call, long long result);
  bool is_direct_fd(int fd) const;

  detail::Syscalls& base_;
  mutable std::mutex mutex_;
  std::vector<Rule> rules_;
  std::vector<int> fired_;       // per rule: how often it fired
  std::vector<int> op_counts_ = std::vector<int>(9, 0);
  std::set<int> direct_fds_;
  std::vector<Call> calls_;
};

}  // namespace ferry::testing
