// StreamPipeline and the watcher: the CPU side of stream-ordered requests (see stream_pipeline.hpp).
#include "io/stream_pipeline.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>

#include <fmt/format.h>

#include "io/thread_pool.hpp"

namespace ferry::detail {

// One thread for every pending stream-ordered request: it reads their gpu words (plain loads of pinned
// memory), begins requests, starts the steps their slots allow, and finishes those the stream is done
// with. It never calls CUDA and never waits for anything but its own timer.
class StreamWatcher {
 public:
  static StreamWatcher& instance() {
    static auto* watcher = new StreamWatcher();  // leaked: requests may finish during static destruction
    return *watcher;
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
        if (p->poll().finished) finished.push_back(p.get());
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

StreamPipeline::StreamPipeline(PipelinePlan plan, Words gpu, Words cpu, Step step, Begin begin,
                               StepsEnded steps_ended, Finish finish, std::string description)
    : plan_(std::move(plan)),
      gpu_(std::move(gpu)),
      cpu_(std::move(cpu)),
      step_(std::move(step)),
      begin_(std::move(begin)),
      steps_ended_(std::move(steps_ended)),
      finish_(std::move(finish)),
      description_(std::move(description)),
      gpu_final_(plan_.lanes, UINT32_MAX),
      next_(plan_.lanes, 0),
      prefix_(plan_.lanes, 0),
      ended_(plan_.steps, false) {}

void StreamPipeline::watch(std::shared_ptr<StreamPipeline> pipeline) {
  {
    std::lock_guard<std::mutex> lock(pipeline->mutex_);
    pipeline->self_ = pipeline;
  }
  StreamWatcher::instance().add(std::move(pipeline));
}

void StreamPipeline::queueing_ended(const Status& error, std::vector<std::uint32_t> gpu_final) {
  std::unique_lock<std::mutex> lock(mutex_);
  gpu_final_ = std::move(gpu_final);
  gpu_final_.resize(plan_.lanes, 0);
  if (error.ok()) return;
  if (status_.ok()) status_ = error;
  stopped_ = true;  // no further step starts; the part queued is let through
  release_if_stopped(lock);
}

std::size_t StreamPipeline::lane_steps(std::size_t lane) const {
  return plan_.steps > lane ? (plan_.steps - lane + plan_.lanes - 1) / plan_.lanes : 0;
}

bool StreamPipeline::gate_open(std::size_t index) const {
  const std::size_t lane = index % plan_.lanes;
  const std::size_t m = index / plan_.lanes;
  auto at_least = [&](std::size_t word_lane, std::size_t value) {
    return gpu_[word_lane]->load(std::memory_order_acquire) >= static_cast<std::uint32_t>(value);
  };
  switch (plan_.gate) {
    case StepGate::stream_reached: return at_least(0, 1);
    case StepGate::slot_free: {
      const std::size_t slots_per_lane = plan_.window / plan_.lanes;
      return index < plan_.window ? at_least(0, 1) : at_least(lane, m - slots_per_lane + 2);
    }
    case StepGate::copied_out: return at_least(lane, m + 2);
  }
  return false;
}

std::size_t StreamPipeline::next_open_step() const {
  std::size_t best = plan_.steps;
  for (std::size_t lane = 0; lane < plan_.lanes; ++lane) {
    const std::size_t index = next_[lane] * plan_.lanes + lane;
    if (index < best && gate_open(index)) best = index;
  }
  return best;
}

bool StreamPipeline::streams_done() const {
  for (std::size_t lane = 0; lane < plan_.lanes; ++lane) {
    if (gpu_[lane]->load(std::memory_order_acquire) < gpu_final_[lane]) return false;
  }
  return true;
}

bool StreamPipeline::release_if_stopped(std::unique_lock<std::mutex>& lock) {
  if (released_ || running_ > 0) return false;
  if (!stopped_ && started_ < plan_.steps) return false;
  stopped_ = true;
  released_ = true;
  // Every wait a lane may still meet asks for at most its steps' count: after a failure or a cancel it
  // goes on at once (over whatever the slots hold: the buffer's contents are unspecified then).
  for (std::size_t lane = 0; lane < plan_.lanes; ++lane) {
    cpu_[lane]->store(static_cast<std::uint32_t>(lane_steps(lane)), std::memory_order_release);
  }
  lock.unlock();
  if (steps_ended_) steps_ended_();
  lock.lock();
  return true;
}

StreamPipeline::Poll StreamPipeline::poll() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!begun_ && !stopped_ && plan_.steps > 0 && gpu_[0]->load(std::memory_order_acquire) >= 1) {
    begun_ = true;
    Status began = begin_ ? begin_() : Status();
    if (!began.ok()) {
      status_ = began;
      stopped_ = true;
    }
  }
  release_if_stopped(lock);
  Poll poll;
  if (begun_ && !stopped_) {
    // The steps that may start now: per lane, those from its next whose gates are open.
    const unsigned room = plan_.max_parallel > running_ ? plan_.max_parallel - running_ : 0;
    unsigned start = 0;
    for (std::size_t lane = 0; lane < plan_.lanes && start < room; ++lane) {
      for (std::size_t m = next_[lane]; start < room; ++m) {
        const std::size_t index = m * plan_.lanes + lane;
        if (index >= plan_.steps || !gate_open(index)) break;
        ++start;
      }
    }
    running_ += start;
    poll.wants_steps = start > 0;
    lock.unlock();
    for (unsigned i = 0; i < start; ++i) {
      stream_pool().submit([self = self_] { self->run_steps(); });
    }
    lock.lock();
  }
  if (released_ && running_ == 0 && streams_done() && self_) {
    PipelineOutcome outcome{status_, bytes_done_.load(std::memory_order_relaxed), std::move(report_)};
    auto keep = std::move(self_);
    lock.unlock();
    finish_(std::move(outcome));
    poll.finished = true;
  }
  return poll;
}

void StreamPipeline::run_steps() {
  Report local;
  for (;;) {
    std::size_t index = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      index = stopped_ ? plan_.steps : next_open_step();
      if (index >= plan_.steps) {
        report_.merge(local);
        --running_;
        release_if_stopped(lock);
        return;  // the watcher starts the next steps when their gates open
      }
      ++next_[index % plan_.lanes];
      ++started_;
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
  ++ended_count_;
  const std::size_t lane = index % plan_.lanes;
  std::size_t prefix = prefix_[lane];
  while (prefix * plan_.lanes + lane < plan_.steps && ended_[prefix * plan_.lanes + lane]) ++prefix;
  if (prefix != prefix_[lane]) {
    prefix_[lane] = prefix;
    cpu_[lane]->store(static_cast<std::uint32_t>(prefix), std::memory_order_release);  // the lane may copy these
  }
}

void StreamPipeline::cancel() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (released_ && !self_) return;  // finished
  if (status_.ok() && !(released_ && ended_count_ == plan_.steps)) {
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
  std::string gpu, ends, cpu;
  for (std::size_t lane = 0; lane < plan_.lanes; ++lane) {
    const char* sep = lane == 0 ? "" : "/";
    gpu += fmt::format("{}{}", sep, gpu_[lane]->load());
    ends += fmt::format("{}{}", sep, gpu_final_[lane]);
    cpu += fmt::format("{}{}", sep, cpu_[lane]->load());
  }
  return fmt::format("{}: {} of {} steps ended ({} running){}{}; the streams' words are {} (done at {}), Ferry's {}",
                     description_, ended_count_, plan_.steps, running_,
                     begun_ ? "" : ", the stream has not reached it",
                     status_.ok() ? "" : ", failing: " + status_.message(), gpu, ends, cpu);
}

std::vector<std::string> pending_stream_pipelines() { return StreamWatcher::instance().describe(); }

}  // namespace ferry::detail
