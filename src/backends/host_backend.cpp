// Host route workers: no per-thread resources, one read_task/write_task per task.
#include "backends/host_backend.hpp"

namespace ferry::detail {
namespace {

class HostSource final : public TaskSource {
 public:
  HostSource(const TaskIo& io, bool is_read, void* buffer, Decision decision)
      : io_(io), is_read_(is_read), buffer_(static_cast<char*>(buffer)), decision_(std::move(decision)) {}

  Result<std::unique_ptr<TaskWorker>> make_worker() override {
    return std::unique_ptr<TaskWorker>(new Worker(*this));
  }
  const Decision& decision() const override { return decision_; }

 private:
  class Worker final : public TaskWorker {
   public:
    explicit Worker(HostSource& source) : s_(source) {}
    Result<std::uint64_t> run(const Task& t, Report& report) override {
      char* at = s_.buffer_ + t.buffer_offset;
      if (s_.is_read_) return read_task(s_.io_, t, at, "host", report);
      FERRY_RETURN_IF_ERROR(write_task(s_.io_, t, at, "host", report));
      return t.length;
    }

   private:
    HostSource& s_;
  };

  TaskIo io_;
  bool is_read_;
  char* buffer_;
  Decision decision_;
};

}  // namespace

std::shared_ptr<TaskSource> make_host_source(const TaskIo& io, bool is_read, void* buffer, Decision decision) {
  return std::make_shared<HostSource>(io, is_read, buffer, std::move(decision));
}

}  // namespace ferry::detail
