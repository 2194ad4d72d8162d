// StreamRequest and the watcher: the CPU side of stream-ordered requests (see stream_request.hpp).
#include "file/stream_request.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>

#include <fmt/format.h>

#include "backends/staging_pool.hpp"
#include "base/fork_guard.hpp"
#include "base/timing.hpp"
#include "engine/thread_pool.hpp"
#include "ferry/file.hpp"
#include "report/process_report.hpp"

namespace ferry::detail {

// One thread for every pending stream-ordered request: it reads their gpu words (plain loads of pinned
// memory), begins requests, starts the steps their slots allow, and finishes those the stream is done
// with. It never calls CUDA and never waits for anything but its own timer.
class StreamWatcher {
 public:
  static StreamWatcher& instance() {
    static constinit std::atomic<StreamWatcher*> watcher{nullptr};  // leaked: requests may finish during exit
    return made_once(watcher, [] { return new StreamWatcher(); });
  }

  void add(std::shared_ptr<StreamRequest> request) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      active_.push_back(std::move(request));
      if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    }
    wake_.notify_one();
  }

  std::vector<std::string> describe() {
    std::vector<std::shared_ptr<StreamRequest>> active;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      active = active_;
    }
    std::vector<std::string> lines;
    for (const auto& r : active) {
      if (std::string line = r->describe(); !line.empty()) lines.push_back(std::move(line));
    }
    return lines;
  }

 private:
  // How long the watcher sleeps between looks while requests are pending: the latency it adds at a
  // request's start, at each slot's reuse and at its end. The timer slack is lowered to match.
  static constexpr std::chrono::microseconds kPollInterval{20};

  void loop() {
    (void)::prctl(PR_SET_TIMERSLACK, 1000UL);  // 1 us: a sleep of 20 us then lasts about that
    std::vector<std::shared_ptr<StreamRequest>> snapshot;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return !active_.empty(); });
        snapshot = active_;
      }
      std::vector<StreamRequest*> finished;
      for (const auto& r : snapshot) {
        if (r->poll()) finished.push_back(r.get());
      }
      snapshot.clear();
      if (!finished.empty()) {
        std::lock_guard<std::mutex> lock(mutex_);
        std::erase_if(active_, [&](const std::shared_ptr<StreamRequest>& r) {
          return std::find(finished.begin(), finished.end(), r.get()) != finished.end();
        });
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<StreamRequest>> active_;
  std::thread thread_;
};

std::string RequestLabel::text() const {
  const bool reading = is_read(direction);
  return fmt::format("stream-ordered {} of {} bytes at offset {} {} \"{}\" on stream {}", reading ? "read" : "write",
                     size, offset, reading ? "from" : "to", path, stream);
}

Status RequestLabel::error(const Status& why) const {
  return Status(why.code() == ErrorCode::ok ? ErrorCode::internal : why.code(),
                fmt::format("Could not queue a {}: {}", text(), why.message()), why.sys_errno(), path);
}

void StreamRequest::watch() {
  ended_.assign(tasks.size(), false);  // before the watcher, which takes its lock, can see the request
  StreamWatcher::instance().add(shared_from_this());
}

void StreamRequest::queueing_ended(const Status& error, std::uint32_t gpu_final) {
  std::lock_guard<std::mutex> lock(mutex_);
  gpu_final_ = gpu_final;
  if (error.ok()) return;
  if (status_.ok()) status_ = error;
  stopped_ = true;  // no further step starts; the part queued is let through
  release_if_stopped();
}

std::uint32_t StreamRequest::gate(std::size_t index) const {
  // Host memory: every step once the stream reached the request (gpu >= 1).
  if (mechanism == StreamOrder::stream_wait) return 1;
  // Reads through bounce slots: step i reuses the slot of step i - window, whose copy must be done.
  const std::size_t window = slots.size();
  if (is_read(label.direction)) return index < window ? 1u : static_cast<std::uint32_t>(index - window + 2);
  // Writes: step i writes out what the stream's copy i put in its slot.
  return static_cast<std::uint32_t>(index + 2);
}

void StreamRequest::release_if_stopped() {
  if (released_ || running_ > 0 || (!stopped_ && next_step_ < tasks.size())) return;
  stopped_ = true;
  released_ = true;
  // Every wait the stream may still meet asks for at most the steps' count: after a failure or a cancel
  // it goes on at once (over whatever the slots hold: the buffer's contents are unspecified then).
  cpu.host->store(static_cast<std::uint32_t>(tasks.size()), std::memory_order_release);
  use_.reset();  // no step touches the File any more
}

bool StreamRequest::poll() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint32_t gpu_now = gpu.host->load(std::memory_order_acquire);
  if (!begun_ && !stopped_ && gpu_now >= gate(0)) {
    begun_ = true;
    auto in_use = file->use();
    if (in_use.ok()) {
      use_.emplace(std::move(*in_use));
    } else {
      status_ = Status(ErrorCode::failed_precondition,
                       fmt::format("\"{}\" was closed before the stream reached the {}", label.path, label.text()),
                       EBADF, label.path);
      stopped_ = true;
    }
  }
  release_if_stopped();
  if (begun_ && !stopped_) {
    std::size_t next = next_step_;
    while (running_ + (next - next_step_) < max_parallel && next < tasks.size() && gpu_now >= gate(next)) ++next;
    const auto start = static_cast<unsigned>(next - next_step_);
    running_ += start;
    lock.unlock();
    for (unsigned i = 0; i < start; ++i) {
      stream_pool().submit([self = shared_from_this()] { self->run_steps(); });
    }
    lock.lock();
  }
  if (released_ && running_ == 0 && gpu_now >= gpu_final_ && !finished_) {
    finished_ = true;
    lock.unlock();
    finish();
    return true;
  }
  return false;
}

void StreamRequest::run_steps() {
  Report local;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopped_ && next_step_ < tasks.size() && gpu.host->load(std::memory_order_acquire) >= gate(next_step_)) {
    const std::size_t index = next_step_++;
    lock.unlock();
    Result<std::uint64_t> moved = step(index, local);
    lock.lock();
    step_ended(index, std::move(moved));
  }
  report_.merge(local);
  --running_;
  release_if_stopped();  // the watcher starts the next steps when their gates open
}

Result<std::uint64_t> StreamRequest::step(std::size_t index, Report& report) {
  const Task& t = tasks[index];
  void* at = slots.empty() ? buffer + t.buffer_offset : slots[index % slots.size()];
  const char* route_text = route_name(decision.route);
  const std::uint64_t started = now_ns();
  std::uint64_t bytes = t.length;
  if (is_read(label.direction)) {
    FERRY_ASSIGN_OR_RETURN(bytes, file->source->read(source_request, t, at, route_text, report));
    if (bytes < t.length) return EndOfFileRule{false, &file->path, source_request.extent.bytes}.shrank(t, bytes);
  } else {
    FERRY_RETURN_IF_ERROR(file->source->write(source_request, t, at, route_text, report));
  }
  report.count(decision.route, decision.reason, decision.detail, bytes, now_ns() - started);
  return bytes;
}

void StreamRequest::step_ended(std::size_t index, Result<std::uint64_t> result) {
  if (!result.ok()) {
    if (status_.ok()) status_ = result.status();
    stopped_ = true;
    return;
  }
  bytes_done_.fetch_add(*result, std::memory_order_relaxed);
  ended_[index] = true;
  std::size_t prefix = prefix_;
  while (prefix < tasks.size() && ended_[prefix]) ++prefix;
  if (prefix != prefix_) {
    prefix_ = prefix;
    cpu.host->store(static_cast<std::uint32_t>(prefix), std::memory_order_release);  // the stream may copy these
  }
}

void StreamRequest::finish() {
  for (auto& kit : kits) process_staging_pool().release(std::move(kit));
  kits.clear();
  words->release(gpu, cpu);
  report_.stream_order[static_cast<std::size_t>(mechanism)] = 1;
  report_.io.pinned_wait_ns += pinned_wait_ns;
  file->add_to_report(report_);
  add_to_process_report(report_);
  Result<Transfer> result = status_;
  if (status_.ok()) result = Transfer{bytes_done(), std::move(report_)};
  if (auto outer = future.lock()) outer->complete_deferred(std::move(result));
}

void StreamRequest::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  if (status_.ok() && !(released_ && prefix_ == tasks.size())) {
    status_ = Status(ErrorCode::cancelled, "the request was cancelled");
  }
  stopped_ = true;
  release_if_stopped();
}

std::string StreamRequest::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return {};
  return fmt::format(
      "{} ({}, {}): {} of {} steps ended ({} running){}{}; the stream's word is {} (done at {}), Ferry's {}",
      label.text(), route_name(decision.route), stream_order_name(mechanism), prefix_, tasks.size(), running_,
      begun_ ? "" : ", the stream has not reached it", status_.ok() ? "" : ", failing: " + status_.message(),
      gpu.host->load(), gpu_final_ != UINT32_MAX ? std::to_string(gpu_final_) : "not known while the caller queues",
      cpu.host->load());
}

}  // namespace ferry::detail

std::vector<std::string> ferry::pending_stream_requests() { return detail::StreamWatcher::instance().describe(); }
