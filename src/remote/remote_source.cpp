// RemoteSource: remote::Object behind the Source seam, and ferry::remote's entry points.
#include "remote/remote_source.hpp"

#include <fmt/format.h>

#include "remote/object.hpp"
#include "remote/url.hpp"

namespace ferry::detail {
namespace {

class RemoteSource final : public Source {
 public:
  RemoteSource(std::unique_ptr<remote::Object> object, unsigned connections)
      : object_(std::move(object)), connections_(connections) {}

  const std::string& name() const override { return object_->shown(); }
  // The size open() saw: every later answer is checked against it and the ETag, so it cannot change. A
  // server without range requests is read as a file without a size is: in one task, front to back.
  Result<Extent> extent() const override { return Extent{object_->ranges_supported(), object_->size()}; }
  std::uint64_t task_alignment() const override { return 1; }
  unsigned parallel_tasks() const override { return connections_; }

  Result<std::uint64_t> read(const SourceRequest& request, const Task& t, void* dst, const char* /*route_label*/,
                             Report& report) override {
    FERRY_ASSIGN_OR_RETURN(std::uint64_t n, object_->read_range(static_cast<char*>(dst), t.length, t.file_offset,
                                                                request.stop.get()));
    ++report.io.buffered_ops;
    return n;
  }
  Status write(const SourceRequest& /*request*/, const Task& /*t*/, const void* /*src*/, const char* /*route_label*/,
               Report& /*report*/) override {
    return Status(ErrorCode::failed_precondition,
                  fmt::format("Could not write to \"{}\": remote writes are not supported yet", name()), 0, name());
  }
  Status sync() override { return Status(); }
  const std::string& open_note() const override { return object_->note(); }
  Status close() override { return Status(); }
  std::string activity_note() const override {
    const remote::ObjectCounters c = object_->counters();
    const std::string etag = object_->etag();
    return fmt::format("remote object \"{}\" ({} bytes, ETag {}) since open: {} HTTP requests, {} retries, {} "
                       "connections, {} bytes",
                       name(), object_->size(), etag.empty() ? "none" : remote::printable(etag), c.requests,
                       c.retries, c.connections, c.bytes);
  }

 private:
  std::unique_ptr<remote::Object> object_;
  const unsigned connections_;
};

}  // namespace

Result<std::shared_ptr<Source>> open_remote_source(const std::string& url, std::string_view mode,
                                                   const RemoteSettings& settings,
                                                   const ferry::remote::Credentials* given) {
  FERRY_ASSIGN_OR_RETURN(auto object, remote::Object::open(url, mode, settings, given));
  return std::shared_ptr<Source>(std::make_shared<RemoteSource>(std::move(object), settings.connections));
}

}  // namespace ferry::detail

namespace ferry::remote {

bool is_remote_url(std::string_view path) noexcept {
  try {
    const std::string s = detail::remote::scheme_of(path);
    return s == "http" || s == "https" || s == "s3";
  } catch (...) {
    return false;
  }
}

std::string display_url(std::string_view url) { return detail::remote::display_form(url); }

std::string unavailable_reason() { return {}; }

}  // namespace ferry::remote
