// An in-memory Source for unit tests: proves that the host and staged routes serve any source through the
// seam (src/source/source.hpp) without knowing where its bytes live. Writes past the end grow it, as a file.
#pragma once

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "source/source.hpp"

namespace ferry::testing {

class MemorySource final : public detail::Source {
 public:
  MemorySource(std::string name, std::vector<std::uint8_t> bytes) : name_(std::move(name)), bytes_(std::move(bytes)) {}

  const std::string& name() const override { return name_; }
  Result<detail::Extent> extent() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return detail::Extent{true, bytes_.size()};
  }
  std::uint64_t task_alignment() const override { return 1; }
  std::size_t queue_depth() const override { return depth; }
  void read_batch(const detail::SourceRequest& request, std::span<const detail::TaskRead> reads,
                  const char* route_label, Report& report, std::span<Result<std::uint64_t>> results) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++batches;
      largest_batch = std::max<std::uint64_t>(largest_batch, reads.size());
    }
    Source::read_batch(request, reads, route_label, report, results);
  }
  Result<std::uint64_t> read(const detail::SourceRequest& /*request*/, const detail::Task& t, void* dst,
                             const char* /*route_label*/, Report& report) override {
    if (before_read) before_read(t);
    std::lock_guard<std::mutex> lock(mutex_);
    ++reads;
    ++report.io.buffered_ops;
    if (t.file_offset >= bytes_.size()) return std::uint64_t{0};
    std::uint64_t n = std::min<std::uint64_t>(t.length, bytes_.size() - t.file_offset);
    std::memcpy(dst, bytes_.data() + t.file_offset, n);
    return n;
  }
  Status write(const detail::SourceRequest& /*request*/, const detail::Task& t, const void* src,
               const char* /*route_label*/, Report& report) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++writes;
    ++report.io.buffered_ops;
    if (bytes_.size() < t.file_offset + t.length) bytes_.resize(t.file_offset + t.length);
    std::memcpy(bytes_.data() + t.file_offset, src, t.length);
    return Status();
  }
  Status sync() override { return Status(); }
  const std::string& open_note() const override { return note_; }
  Status close() override {
    closed = true;
    return Status();
  }

  std::vector<std::uint8_t> bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
  }

  std::size_t depth = 1;                // what queue_depth() answers: > 1 makes workers hand over batches
  std::function<void(const detail::Task&)> before_read;  // called first by every read (set before any)
  std::uint64_t reads = 0, writes = 0;  // tasks served (under the lock)
  std::uint64_t batches = 0, largest_batch = 0;
  bool closed = false;

 private:
  const std::string name_;
  const std::string note_;
  mutable std::mutex mutex_;
  std::vector<std::uint8_t> bytes_;
};

}  // namespace ferry::testing
