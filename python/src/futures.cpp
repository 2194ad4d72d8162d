#include "futures.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <iterator>
#include <unordered_set>
#include <utility>
#include <vector>

#include "errors.hpp"

namespace py = pybind11;

namespace ferry::python {
namespace {

// A future dropped by an interrupt: its request (cancelled), and the buffer it must keep alive until the
// request is over.
struct Parked {
  Future future;
  py::object keep;
  std::shared_ptr<Completion> completion;
};

// Every live PyFuture (for cancel_requests) and every parked one. Allocated once and never freed: they
// may hold Python objects, which must not be released by a static destructor after Python finalized
// (the atexit hook reaps the parked ones before).
std::mutex g_registry_mutex;
auto* const g_live = new std::unordered_set<PyFuture*>();
auto* const g_parked = new std::vector<Parked>();
// Held across fork(): a child finds the sets whole, and the mutex free (a thread of the parent that held it at
// the fork, dropping a future without the GIL, would have left it held for good there).
const int g_registry_held_across_forks = pthread_atfork([] { g_registry_mutex.lock(); },
                                                        [] { g_registry_mutex.unlock(); },
                                                        [] { g_registry_mutex.unlock(); });

// Set while the Python object of a PyFuture is deallocated as a KeyboardInterrupt or SystemExit
// propagates: the interpreter's error indicator is still set while it pops the stacks of the frames it
// unwinds, and pybind11 clears it before it runs the C++ destructor, hence this flag.
thread_local bool t_dropped_by_interrupt = false;

destructor g_base_dealloc = nullptr;

// The SIGINTs (Ctrl-C) that reached the process, so that a future dropped after one is cancelled even where
// Python's error indicator no longer says so: Python 3.12 inlines list comprehensions, and when a
// KeyboardInterrupt leaves one, the half-built list is released by the comprehension's own clean-up handler,
// after the interpreter took the exception off the thread state.
std::atomic<std::uint64_t> g_sigints{0};
struct sigaction g_previous_sigint{};

std::uint64_t sigint_count() { return g_sigints.load(std::memory_order_relaxed); }

void count_then_chain(int signo, siginfo_t* info, void* context) {
  g_sigints.fetch_add(1, std::memory_order_relaxed);  // lock-free: async-signal-safe
  if (g_previous_sigint.sa_flags & SA_SIGINFO) {
    g_previous_sigint.sa_sigaction(signo, info, context);
  } else if (g_previous_sigint.sa_handler != SIG_DFL && g_previous_sigint.sa_handler != SIG_IGN) {
    g_previous_sigint.sa_handler(signo);
  }
}

// The tokens of announced futures whose requests completed (Completion::announce_as), for the one Python
// thread that waits for them. A leaf lock: nothing else is locked while it is held.
struct DoneQueue {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::uint64_t> tokens;
};

std::atomic<DoneQueue*> g_done{new DoneQueue()};

// A forked child has none of the parent's threads, and a copy of the queue that one of them may have held
// locked, or waited on, at the fork: the child starts a queue of its own (the old one is left, never freed).
const int g_done_queue_forks = pthread_atfork(nullptr, nullptr, [] { g_done.store(new DoneQueue()); });

void put_on_done_queue(std::uint64_t token) {
  DoneQueue* q = g_done.load();
  {
    std::lock_guard<std::mutex> lock(q->mutex);
    q->tokens.push_back(token);
  }
  q->cv.notify_one();
}

void future_dealloc(PyObject* self) {
  const bool saved = t_dropped_by_interrupt;
  PyObject* raised = PyErr_Occurred();
  t_dropped_by_interrupt = raised != nullptr && (PyErr_GivenExceptionMatches(raised, PyExc_KeyboardInterrupt) ||
                                                 PyErr_GivenExceptionMatches(raised, PyExc_SystemExit));
  g_base_dealloc(self);
  t_dropped_by_interrupt = saved;
}

}  // namespace

void set_up_future_type(PyHeapTypeObject* heap_type) {
  PyTypeObject* type = &heap_type->ht_type;
  g_base_dealloc = type->tp_dealloc != nullptr ? type->tp_dealloc : py::detail::pybind11_object_dealloc;
  type->tp_dealloc = future_dealloc;
}

void install_sigint_counter() {
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
  static bool installed = false;  // module init runs under the GIL
  if (installed) return;
  struct sigaction now{};
  if (::sigaction(SIGINT, nullptr, &now) != 0) return;
  const bool has_handler = (now.sa_flags & SA_SIGINFO) ? now.sa_sigaction != nullptr
                                                        : now.sa_handler != SIG_DFL && now.sa_handler != SIG_IGN;
  if (!has_handler) return;
  g_previous_sigint = now;
  struct sigaction counting = now;
  counting.sa_flags |= SA_SIGINFO;
  counting.sa_sigaction = count_then_chain;
  if (::sigaction(SIGINT, &counting, nullptr) == 0) installed = true;
}

void cancel_requests(const FileRequests* file) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  for (PyFuture* f : *g_live) {
    if (file == nullptr || f->file() == file) f->request_stop();
  }
}

void reap_parked(bool wait) {
  if (wait) {
    std::vector<std::shared_ptr<Completion>> pending;
    {
      std::lock_guard<std::mutex> lock(g_registry_mutex);
      for (const Parked& p : *g_parked) pending.push_back(p.completion);
    }
    py::gil_scoped_release release;
    for (auto& c : pending) c->wait();
  }
  // Moving and dropping Python references needs the GIL: the registry's mutex is taken with it held,
  // which is safe because nobody waits for the GIL while holding that mutex.
  std::vector<Parked> over;
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    auto over_from = std::stable_partition(g_parked->begin(), g_parked->end(),
                                           [](const Parked& p) { return !p.completion->is_done(); });
    over.assign(std::make_move_iterator(over_from), std::make_move_iterator(g_parked->end()));
    g_parked->erase(over_from, g_parked->end());
  }
  // `over` goes here, with the GIL held: the buffers are released.
}

py::tuple report_parts(const Report& report) {
  // The table holds what the JSON holds (paths, a server's ETag): bytes that are not UTF-8 are decoded as
  // the JSON encodes them, with surrogate escapes.
  const std::string t = report.table();
  auto text = steal_or_throw(PyUnicode_DecodeUTF8(t.data(), static_cast<Py_ssize_t>(t.size()), "surrogateescape"));
  return py::make_tuple(report.to_json(), text);
}

std::optional<Clock::time_point> deadline_after(std::optional<double> seconds) {
  if (!seconds || !(*seconds < 1e9)) return std::nullopt;  // None, inf (and NaN, refused in Python)
  double s = std::max(*seconds, 0.0);
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// ---- Completion

void Completion::mark() {
  std::optional<std::uint64_t> token;
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
    token = announce;
  }
  cv.notify_all();
  if (token) put_on_done_queue(*token);
}

void Completion::announce_as(std::uint64_t token) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!done) {
      announce = token;  // mark() announces it
      return;
    }
  }
  put_on_done_queue(token);
}

std::vector<std::uint64_t> wait_for_done_futures(std::optional<double> timeout) {
  const std::optional<Clock::time_point> deadline = deadline_after(timeout);
  std::vector<std::uint64_t> tokens;
  DoneQueue* q = g_done.load();
  // Not py::gil_scoped_release: this runs on a daemon thread, and one that takes the GIL back while the
  // interpreter finalizes is ended there (pthread_exit). The unwinding that ends it must not begin inside a
  // destructor, which is noexcept (std::terminate: the process would abort at exit).
  PyThreadState* released = PyEval_SaveThread();
  {
    std::unique_lock<std::mutex> lock(q->mutex);
    auto ready = [q] { return !q->tokens.empty(); };
    if (deadline) {
      q->cv.wait_until(lock, *deadline, ready);
    } else {
      q->cv.wait(lock, ready);
    }
    tokens.swap(q->tokens);
  }
  PyEval_RestoreThread(released);
  return tokens;
}

// ---- PyFuture

PyFuture::PyFuture(Future future, py::object keep, std::shared_ptr<FileRequests> requests, std::string what,
                   std::string path, bool at_position, bool waiter_runs)
    : requests_(std::move(requests)),
      what_(std::move(what)),
      path_(std::move(path)),
      future_(std::move(future)),
      keep_(std::move(keep)),
      sigints_at_start_(sigint_count()),
      at_position_(at_position),
      waiter_runs_(waiter_runs) {
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    g_live->insert(this);
  }
  // The callback may run at once, here, when the request failed before it started. It leaves a one-task
  // request to the waiter that Python usually is next (result(), a blocking read()): see wait_until.
  future_.then([completion = completion_, requests = requests_](const Result<Transfer>&) {
    completion->mark();
    if (requests) requests->finished();
  });
}

PyFuture::~PyFuture() {
  // Dropped as an interrupt propagates, or after a Ctrl-C reached the process since the request began
  // (Python 3.12 releases a comprehension's half-built list with no error set): stop, do not wait.
  const bool interrupted =
      t_dropped_by_interrupt || (sigint_count() != sigints_at_start_ && PyGILState_Check());
  if (interrupted && !done()) {
    if (at_position_) {
      // A blocking read()'s or write()'s own future (see futures.hpp): waited for below (a task each at most).
      // Parked, its position was settled only after the next read() had reserved from the advanced one.
      request_stop();
    } else {
      // Cancel, and hand the request and its buffer to reap_parked().
      std::lock_guard<std::mutex> registry(g_registry_mutex);
      g_live->erase(this);
      std::lock_guard<std::mutex> lock(mutex_);
      future_.cancel();
      g_parked->push_back(Parked{std::move(future_), std::move(keep_), completion_});
      return;
    }
  }
  // A request that is over needs no wait, so the GIL stays (the locks are never held by a thread waiting for
  // it): a daemon thread dropping a done future at interpreter exit must not retake the GIL in a destructor.
  std::optional<py::gil_scoped_release> release;  // declared first: retaken after the locks are let go
  if (PyGILState_Check() && !completion_->is_done()) release.emplace();
  completion_->wait();
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    g_live->erase(this);
  }
}

bool PyFuture::done() const {
  if (completion_->is_done()) return true;
  hurry();
  return completion_->is_done();
}

void PyFuture::hurry() const {
  // Polling the Future ends a one-task request's wait for its caller (docs/engine.md). try_lock: the mutex
  // may be held by a thread running the request itself, and this may be called with the GIL held.
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (lock.owns_lock() && !outcome_) (void)future_.done();
}

bool PyFuture::wait_until(std::optional<Clock::time_point> deadline) {
  if (completion_->is_done()) return true;  // without giving the GIL away (see settle())
  if (deadline) {
    hurry();  // a timed wait will not run the request here: a worker takes it now
  } else if (waiter_runs_) {
    // A wait without a limit for a small request of a local file waits in one piece, which runs a one-task
    // request that no worker has begun on this thread: no hand-off to a worker and back (most of a small
    // read's cost). A Ctrl-C meanwhile waits no longer than it would for that task running on a worker.
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!outcome_) future_.wait();
  }
  return wait_interruptibly([this](std::chrono::milliseconds d) { return completion_->wait_for(d); }, deadline,
                            [this] { stop_and_settle(); });
}

const Result<Transfer>& PyFuture::settle() {
  bool first = false;
  {
    // The request is done, so mutex_ is nearly always free: the outcome is taken with the GIL held, which
    // saves a hand-over of the GIL, and keeps the ferry-futures thread (a daemon thread) from retaking it in
    // a destructor, where being ended at interpreter exit would abort the process.
    std::optional<py::gil_scoped_release> release;  // declared first: retaken after mutex_ is let go
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
      release.emplace();
      lock.lock();
    }
    first = !outcome_;
    if (first) {
      bytes_at_end_ = future_.bytes_done();
      Result<Transfer> r = future_.get();
      if (!r.ok() && r.status().code() == ErrorCode::cancelled && r.status().path().empty()) {
        // The engine's message knows nothing of the request: name it, as every other error does.
        r = Status(ErrorCode::cancelled, "Could not " + what_ + ": the request was cancelled",
                   r.status().sys_errno(), path_);
      }
      outcome_.emplace(std::move(r));
    }
  }
  if (first) keep_ = py::none();  // the request is over: let the buffer go
  return *outcome_;
}

const Result<Transfer>& PyFuture::stop_and_settle() {
  request_stop();
  without_gil([this] { completion_->wait(); });
  return settle();
}

const Transfer& PyFuture::transfer() {
  const Result<Transfer>& r = outcome();
  check(r.status());
  return *r;
}

py::object PyFuture::exception() {
  const Result<Transfer>& r = outcome();
  return r.ok() ? py::none() : status_exception(r.status());
}

bool PyFuture::cancel(bool wait) {
  const bool was_running = !done();
  request_stop();
  if (!wait) return was_running;
  const Result<Transfer>& r = stop_and_settle();
  return !r.ok() && r.status().code() == ErrorCode::cancelled;
}

std::uint64_t PyFuture::bytes_done() {
  std::lock_guard<std::mutex> lock(mutex_);
  return outcome_ ? bytes_at_end_ : future_.bytes_done();
}

void PyFuture::notify_when_done(std::uint64_t token) {
  hurry();  // nobody waits on this thread next: a worker takes a one-task request now
  completion_->announce_as(token);
}

void PyFuture::request_stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!outcome_) future_.cancel();
}

}  // namespace ferry::python
