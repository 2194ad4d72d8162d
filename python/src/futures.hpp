// Requests in flight as Python sees them: PyFuture (the extension's half of ferry.Future), FileRequests
// (what a File shares with its futures) and the registry of live and parked futures.
//
// Waits and signals. Every wait releases the GIL and wakes every kWaitSlice to run Python's signal handlers
// (main thread only). When one raises (KeyboardInterrupt, or a handler of the program's own), the request is
// cancelled, the wait goes on without the GIL or signal checks until its running tasks stopped (at most one
// task_size each), and only then does the exception propagate: a request never outlives its buffer.
//
// Dropped futures. A PyFuture dropped while its request runs waits for it (its buffer must outlive the
// request), so a discarded pwrite() still completes. So that Ctrl-C stops a program instead of waiting for
// transfers nobody will look at, two exceptions:
// - one dropped while a KeyboardInterrupt or SystemExit propagates (`[f.pread(...) for ...]` interrupted
//   half-way) cancels its request and parks it with its buffer, which reap_parked() lets go once the request is
//   over (at the next request or close() of any File, and at exit): waiting for each in turn would wait for the
//   requests queued before it, not cancelled yet. A blocking read()'s or write()'s own future is cancelled and
//   waited for instead: the file position it settles must be back before the call's caller goes on;
// - at exit after an unhandled KeyboardInterrupt, an atexit hook (ferry/__init__.py) cancels every live
//   request, so the futures the interpreter drops then wait for running tasks only.
//
// Completion announcements, for Python's own waits (concurrent.futures.wait, as_completed, add_done_callback,
// asyncio): a PyFuture given a token (notify_when_done) puts it on one process-wide queue when its request
// completes, without the GIL; one Python thread (ferry._file's watcher) takes the tokens and sets the Python
// futures' states. The engine's threads never take the GIL, so no completion waits for Python.
//
// Thread safety: a PyFuture may be used from several Python threads at once; FileRequests, cancel_requests
// and reap_parked from any thread. Lock order: the registry, then PyFuture::mutex_; nothing waits for the GIL
// while holding either.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

#include "base/fork_guard.hpp"  // the library's own fork helpers, so that both agree on a child
#include "errors.hpp"
#include "ferry/file.hpp"

namespace ferry::python {

using Clock = std::chrono::steady_clock;

/// A report as it crosses into Python: (json, table), the JSON the C++ API and CLI print (parsed into a
/// dict by ferry.Report) and the human table for its repr.
pybind11::tuple report_parts(const Report& report);

/// How often a wait wakes to check for signals: the longest a Ctrl-C waits before Python sees it
/// (plus the time the running tasks take to stop).
inline constexpr std::chrono::milliseconds kWaitSlice{20};

/// A deadline `seconds` from now; none for None, infinity and anything past a billion seconds.
/// NaN and negative values are the caller's to refuse or clamp (the Python layer does).
std::optional<Clock::time_point> deadline_after(std::optional<double> seconds);

/// Calls `wait_slice(d)` (blocks at most `d`, returns whether the awaited event happened) with the GIL released
/// until it returns true or `deadline` passes; returns whether it happened. Between slices it runs Python's
/// signal handlers; when one raises, it calls `on_interrupt()` (GIL held) and rethrows. Call with the GIL held.
template <typename WaitSlice, typename OnInterrupt>
bool wait_interruptibly(WaitSlice&& wait_slice, std::optional<Clock::time_point> deadline,
                        OnInterrupt&& on_interrupt) {
  for (;;) {
    std::chrono::milliseconds slice = kWaitSlice;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
      slice = std::clamp(left, std::chrono::milliseconds(0), slice);
    }
    if (without_gil([&] { return wait_slice(slice); })) return true;
    if (deadline && Clock::now() >= *deadline) return false;
    if (PyErr_CheckSignals() != 0) {
      pybind11::error_already_set raised;  // takes the exception out of the interpreter while we clean up
      on_interrupt();
      throw raised;
    }
  }
}

/// What a File shares with its futures: how many of its requests have not completed, for close().
class FileRequests {
 public:
  ~FileRequests() {
    // A parent's part is never destroyed in a child: its lock or condition variable may be copied in use.
    if (Count* c = count_.load(); c->generation == detail::fork_generation()) delete c;
  }
  /// A request is about to be submitted. Call with the GIL held, after checking that the File is open,
  /// so that a close() on another thread either refuses the request or waits for it.
  void started() {
    Count& c = this_process_count();
    std::lock_guard<std::mutex> lock(c.mutex);
    ++c.running;
  }
  /// A request completed (a Future::then callback, on any thread).
  void finished() {
    Count& c = this_process_count();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.running > 0 && --c.running == 0) c.idle.notify_all();
  }
  /// Waits at most `timeout` until no request runs; returns whether none does.
  bool wait_idle_for(std::chrono::milliseconds timeout) {
    Count& c = this_process_count();
    std::unique_lock<std::mutex> lock(c.mutex);
    return c.idle.wait_for(lock, timeout, [&c] { return c.running == 0; });
  }

 private:
  struct Count {
    std::uint64_t generation;  // detail::fork_generation() of the process that made it
    std::mutex mutex;
    std::condition_variable idle;
    std::uint64_t running = 0;
  };

  // Made anew in a forked child, which has none of its parent's threads: a copy of the lock that one of them
  // held at the fork would stay held for good. A DataLoader worker's first read through a File its parent
  // opened hung in started(), the parent's pool threads having been counting its reads' ends at the fork
  // (about 1 fork in 3,000; python/tests/test_fork.py). The parent's requests, which never end in the child,
  // are not counted there.
  Count& this_process_count() {
    return detail::this_process_part(count_,
                                     [](const Count&, std::uint64_t generation) { return new Count{generation}; });
  }

  std::atomic<Count*> count_{new Count{detail::fork_generation()}};
};

/// Puts a handler that counts SIGINTs in front of the SIGINT handler installed now (Python's), which it calls
/// on: a future dropped after a Ctrl-C is then cancelled, not waited for, on Python 3.12 too (see futures.cpp).
/// Does nothing where SIGINT is ignored or has its default action (no Python handler to chain to). A later
/// signal.signal(SIGINT, ...) replaces the counter: from then on only the error indicator tells.
void install_sigint_counter();

/// Asks the requests of every live future of `file` (of every file, when null) to stop. Does not wait.
void cancel_requests(const FileRequests* file);

/// Lets go of the buffers of parked futures whose requests are over; with `wait`, waits (GIL released) for all of
/// them first. Call with the GIL held.
void reap_parked(bool wait);

/// Makes the Python type of PyFuture tell a future dropped while a KeyboardInterrupt or SystemExit
/// propagates (see above). For py::custom_type_setup.
void set_up_future_type(PyHeapTypeObject* heap_type);

/// Signalled by a Future::then callback when a request is done: waiting on it never touches the Future,
/// so cancel() gets through while another thread waits. (The tests' watchdog uses one as its cancel flag.)
struct Completion {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::optional<std::uint64_t> announce;  // the token mark() puts on the queue of done futures, if any

  void mark();  // done: wakes the waiters, and announces the token given to announce_as(), if any
  bool wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, timeout, [this] { return done; });
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [this] { return done; });
  }
  bool is_done() {
    std::lock_guard<std::mutex> lock(mutex);
    return done;
  }
  /// Puts `token` on the queue of done futures once done (at once when it already is). Once per Completion.
  void announce_as(std::uint64_t token);
};

/// Waits (GIL released) until some announced futures are done, or `timeout` seconds passed (None: no limit);
/// returns the tokens announced since the last call, in order of completion (maybe none). For one thread at a
/// time, a daemon thread: at interpreter exit it may be ended inside, which is safe. Call with the GIL held.
std::vector<std::uint64_t> wait_for_done_futures(std::optional<double> timeout);

/// The extension's side of ferry.Future: keeps the buffer's owner alive until the request is done (dropped
/// before, it waits or parks: see above). result() may be called any number of times (the outcome is kept).
class PyFuture {
 public:
  /// `future` must be valid. `keep` owns the buffer (dropped once the outcome is taken). `what` ("read 4096 bytes
  /// at offset 0 from \"/d/x.bin\"") and `path` name a cancelled request in its message. `requests` (may be null)
  /// learns when the request completes. `at_position`: a request at the file position (File::read_at_position),
  /// which settles the position as it completes. `waiter_runs`: a wait without a limit runs a one-task request on
  /// its own thread (see wait_until); only for small requests of local files (a remote task watches for
  /// cancellation mid-task).
  PyFuture(Future future, pybind11::object keep, std::shared_ptr<FileRequests> requests, std::string what,
           std::string path, bool at_position = false, bool waiter_runs = false);
  PyFuture(const PyFuture&) = delete;
  PyFuture& operator=(const PyFuture&) = delete;
  ~PyFuture();

  /// True once every task of the request has stopped. Never blocks.
  bool done() const;
  /// Waits until done, or until `timeout` seconds passed (None: no limit); returns done(). A signal handler's
  /// exception cancels the request and propagates once its running tasks stopped.
  bool wait(std::optional<double> timeout) { return wait_until(deadline_after(timeout)); }
  /// Bytes transferred, or the request's error as an exception (waits as wait(None) does).
  std::uint64_t result() { return transfer().bytes; }
  /// (json, table) of the request's report; raises the request's error (waits as wait(None) does).
  pybind11::tuple report() { return report_parts(transfer().report); }
  /// The request's error as an exception object, or None (waits as wait(None) does).
  pybind11::object exception();
  /// Asks the request to stop. With `wait`, returns once its running tasks stopped: true when the request
  /// ended cancelled (result() raises ferry.CancelledError), false when it had completed or failed first.
  /// Without `wait`, returns whether the request was still running when asked.
  bool cancel(bool wait);
  /// Bytes moved so far by the request's finished tasks.
  std::uint64_t bytes_done();
  /// Future::cancel() without waiting (cancel_requests). Any thread, GIL or not.
  void request_stop();
  /// Announces `token` (see wait_for_done_futures) once the request is done, at once if it is. Never blocks; a
  /// one-task request kept for its waiter goes to a worker now, as for a poll. Once per future.
  void notify_when_done(std::uint64_t token);
  const FileRequests* file() const { return requests_.get(); }

 private:
  bool wait_until(std::optional<Clock::time_point> deadline);
  /// Waits as wait(None) does, then settles.
  const Result<Transfer>& outcome() {
    wait_until(std::nullopt);
    return settle();
  }
  /// outcome()'s transfer, or its error raised.
  const Transfer& transfer();
  /// Takes the outcome (once), drops the buffer. Call with the GIL held, once done.
  const Result<Transfer>& settle();
  /// Asks the request to stop, waits (GIL released, no signal checks) until its running tasks stopped, settles.
  const Result<Transfer>& stop_and_settle();
  /// A one-task request that nobody runs on their own thread goes to a worker now (polls, timed waits).
  void hurry() const;

  std::shared_ptr<Completion> completion_ = std::make_shared<Completion>();
  std::shared_ptr<FileRequests> requests_;
  std::string what_;
  std::string path_;
  // Guards everything below; never held while waiting for the GIL. Held by a wait that runs the request on its
  // own thread (one task at most).
  mutable std::mutex mutex_;
  Future future_;
  std::optional<Result<Transfer>> outcome_;
  std::uint64_t bytes_at_end_ = 0;
  pybind11::object keep_;  // changed with the GIL held only
  std::uint64_t sigints_at_start_;  // SIGINTs counted when the request began (install_sigint_counter)
  const bool at_position_;
  const bool waiter_runs_;
};

}  // namespace ferry::python
