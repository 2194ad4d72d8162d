// RemoteSource: remote::Object behind the Source seam.
#include "io/remote_source.hpp"

#include <fmt/format.h>

namespace ferry::detail {
namespace {

class RemoteSource final : public Source {
 public:
  explicit RemoteSource(remote::Object object) : object_(std::move(object)), name_(object_.url()) {}

  const std::string& name() const override { return name_; }
  // The size open() saw: every later answer is checked against it and the ETag, so it cannot change.
  Result<Extent> extent() const override { return Extent{true, object_.size()}; }
  std::uint64_t task_alignment() const override { return 1; }

  Result<std::uint64_t> read(const SourceRequest& /*request*/, const Task& t, void* dst, const char* /*route_label*/,
                             Report& report) override {
    FERRY_ASSIGN_OR_RETURN(std::uint64_t n, object_.read(dst, t.length, t.file_offset));
    ++report.io.buffered_ops;
    return n;
  }
  Status write(const SourceRequest& /*request*/, const Task& /*t*/, const void* /*src*/, const char* /*route_label*/,
               Report& /*report*/) override {
    return Status(ErrorCode::failed_precondition,
                  fmt::format("Could not write to \"{}\": remote writes are not supported yet", name_), 0, name_);
  }
  Status sync() override { return Status(); }
  const std::string& open_note() const override { return note_; }
  Status close() override { return Status(); }
  std::string activity_note() const override {
    remote::Counters c = object_.counters();
    return fmt::format("remote object \"{}\" since open: {} HTTP requests, {} retries, {} connections, {} bytes",
                       name_, c.requests, c.retries, c.connections, c.bytes);
  }

 private:
  remote::Object object_;
  const std::string name_;
  const std::string note_;
};

}  // namespace

Result<std::shared_ptr<Source>> open_remote_source(const std::string& url, std::string_view mode) {
  FERRY_ASSIGN_OR_RETURN(remote::Options options, remote::Options::from_environment());
  FERRY_ASSIGN_OR_RETURN(remote::Object object, remote::Object::open(url, options, mode));
  return std::shared_ptr<Source>(std::make_shared<RemoteSource>(std::move(object)));
}

}  // namespace ferry::detail
