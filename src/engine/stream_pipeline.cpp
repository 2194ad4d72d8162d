// StreamPipeline and the watcher: the CPU side of stream-ordered requests (see stream_pipeline.hpp).
#include "engine/stream_pipeline.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>

#include <fmt/format.h>

#include "base/fork_guard.hpp"
#include "engine/thread_pool.hpp"
#include "ferry/file.hpp"

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

  void add(std::shared_ptr<StreamPipeline> pipeline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      active_.push_back(std::move(pipeline));
      if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    }
    wake_.notify_one();
  }

  std::vector<std::string> describe() {
    std::vector<std::shared_ptr<StreamPipeline>> active;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      active = active_;
    }
    std::vector<std::string> lines;
    for (const auto& p : active) {
      if (!p->finished()) lines.push_back(p->describe());
    }
    return lines;
  }

 private:
  // How long the watcher sleeps between looks while requests are pending: the latency it adds at a
  // request's start, at each slot's reuse and at its end. The timer slack is lowered to match.
  static constexpr std::chrono::microseconds kPollInterval{20};

  void loop() {
    (void)::prctl(PR_SET_TIMERSLACK, 1000UL);  // 1 us: a sleep of 20 us then lasts about that
    std::vector<std::shared_ptr<StreamPipeline>> snapshot;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return !active_.empty(); });
        snapshot = active_;
      }
      std::vector<StreamPipeline*> finished;
      for (const auto& p : snapshot) {
        if (p->poll()) finished.push_back(p.get());
      }
      snapshot.clear();
      if (!finished.empty()) {
        std::lock_guard<std::mutex> lock(mutex_);
        std::erase_if(active_, [&](const std::shared_ptr<StreamPipeline>& p) {
          return std::find(finished.begin(), finished.end(), p.get()) != finished.end();
        });
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<StreamPipeline>> active_;
  std::thread thread_;
};

StreamPipeline::StreamPipeline(PipelinePlan plan, std::atomic<std::uint32_t>* gpu, std::atomic<std::uint32_t>* cpu,
                               Step step, Begin begin, StepsEnded steps_ended, Finish finish, std::string description)
    : plan_(std::move(plan)),
      gpu_(gpu),
      cpu_(cpu),
      step_(std::move(step)),
      begin_(std::move(begin)),
      steps_ended_(std::move(steps_ended)),
      finish_(std::move(finish)),
      description_(std::move(description)),
      gpu_final_(plan_.gpu_final),
      ended_(plan_.steps, false) {}

void StreamPipeline::watch(std::shared_ptr<StreamPipeline> pipeline) {
  {
    std::lock_guard<std::mutex> lock(pipeline->mutex_);
    pipeline->self_ = pipeline;
  }
  StreamWatcher::instance().add(std::move(pipeline));
}

void StreamPipeline::queueing_ended(const Status& error, std::uint32_t gpu_final) {
  std::unique_lock<std::mutex> lock(mutex_);
  gpu_final_ = gpu_final;
  if (error.ok()) return;
  if (status_.ok()) status_ = error;
  stopped_ = true;  // no further step starts; the part queued is let through
  release_if_stopped(lock);
}

std::uint32_t StreamPipeline::gate_value(std::size_t index) const {
  switch (plan_.gate) {
    case StepGate::stream_reached: return 1;
    case StepGate::slot_free:
      return index < plan_.window ? 1u : static_cast<std::uint32_t>(index - plan_.window + 2);
    case StepGate::copied_out: return static_cast<std::uint32_t>(index + 2);
  }
  return UINT32_MAX;
}

void StreamPipeline::release_if_stopped(std::unique_lock<std::mutex>& lock) {
  if (released_ || running_ > 0 || (!stopped_ && next_step_ < plan_.steps)) return;
  stopped_ = true;
  released_ = true;
  // Every wait the stream may still meet asks for at most the steps' count: after a failure or a cancel
  // it goes on at once (over whatever the slots hold: the buffer's contents are unspecified then).
  cpu_->store(static_cast<std::uint32_t>(plan_.steps), std::memory_order_release);
  lock.unlock();
  if (steps_ended_) steps_ended_();
  lock.lock();
}

bool StreamPipeline::poll() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint32_t gpu = gpu_->load(std::memory_order_acquire);
  if (!begun_ && !stopped_ && plan_.steps > 0 && gpu >= gate_value(0)) {
    begun_ = true;
    Status began = begin_ ? begin_() : Status();
    if (!began.ok()) {
      status_ = began;
      stopped_ = true;
    }
  }
  release_if_stopped(lock);
  if (begun_ && !stopped_) {
    unsigned start = 0;
    std::size_t next = next_step_;
    while (running_ + start < plan_.max_parallel && next < plan_.steps && gpu >= gate_value(next)) {
      ++start;
      ++next;
    }
    running_ += start;
    lock.unlock();
    for (unsigned i = 0; i < start; ++i) {
      stream_pool().submit([self = self_] { self->run_steps(); });
    }
    lock.lock();
  }
  if (released_ && running_ == 0 && gpu >= gpu_final_ && self_) {
    PipelineOutcome outcome{status_, bytes_done_.load(std::memory_order_relaxed), std::move(report_)};
    auto keep = std::move(self_);
    lock.unlock();
    finish_(std::move(outcome));
    return true;
  }
  return false;
}

void StreamPipeline::run_steps() {
  Report local;
  for (;;) {
    std::size_t index = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const bool open = !stopped_ && next_step_ < plan_.steps &&
                        gpu_->load(std::memory_order_acquire) >= gate_value(next_step_);
      if (!open) {
        report_.merge(local);
        --running_;
        release_if_stopped(lock);
        return;  // the watcher starts the next steps when their gates open
      }
      index = next_step_++;
    }
    step_ended(index, step_(index, local));
  }
}

void StreamPipeline::step_ended(std::size_t index, Result<std::uint64_t> result) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!result.ok()) {
    if (status_.ok()) status_ = result.status();
    stopped_ = true;
    return;
  }
  bytes_done_.fetch_add(*result, std::memory_order_relaxed);
  ended_[index] = true;
  std::size_t prefix = prefix_;
  while (prefix < plan_.steps && ended_[prefix]) ++prefix;
  if (prefix != prefix_) {
    prefix_ = prefix;
    cpu_->store(static_cast<std::uint32_t>(prefix), std::memory_order_release);  // the stream may copy these
  }
}

void StreamPipeline::cancel() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (released_ && !self_) return;  // finished
  if (status_.ok() && !(released_ && prefix_ == plan_.steps)) {
    status_ = Status(ErrorCode::cancelled, "the request was cancelled");
  }
  stopped_ = true;
  release_if_stopped(lock);
}

bool StreamPipeline::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return released_ && !self_;
}

std::string StreamPipeline::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fmt::format("{}: {} of {} steps ended ({} running){}{}; the stream's word is {} (done at {}), Ferry's {}",
                     description_, prefix_, plan_.steps, running_, begun_ ? "" : ", the stream has not reached it",
                     status_.ok() ? "" : ", failing: " + status_.message(), gpu_->load(), gpu_final_,
                     cpu_->load());
}

}  // namespace ferry::detail

std::vector<std::string> ferry::pending_stream_requests() { return detail::StreamWatcher::instance().describe(); }
