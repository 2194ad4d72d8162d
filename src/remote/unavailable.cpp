// ferry::remote in a build without libcurl or libcrypto (FERRY_REMOTE=OFF, or AUTO without them): every
// entry point answers `unavailable` and says why. CMakeLists.txt compiles this file instead of the rest
// of src/remote.
#include <cstdlib>

#include "ferry/remote.hpp"

namespace ferry::remote {
namespace detail {
struct ObjectState {
  Options options;
  std::string url;
};
}  // namespace detail

namespace {
Status unavailable_status(std::string_view url) {
  return Status(ErrorCode::unavailable, "Cannot open \"" + display_url(url) + "\": " + unavailable_reason());
}
}  // namespace

const char* addressing_name(Addressing addressing) noexcept {
  return addressing == Addressing::path ? "path" : addressing == Addressing::virtual_host ? "virtual_host" : "automatic";
}
bool is_remote_url(std::string_view path) noexcept {
  return path.rfind("http://", 0) == 0 || path.rfind("https://", 0) == 0 || path.rfind("s3://", 0) == 0;
}
std::string display_url(std::string_view url) {
  std::string s(url.substr(0, url.find_first_of("?#")));
  const auto rest = s.find("://");
  if (rest == std::string::npos) return s;
  const auto at = s.find('@', rest);
  const auto slash = s.find('/', rest + 3);
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) s.erase(rest + 3, at - rest - 2);
  return s;
}
std::string unavailable_reason() {
  return "Ferry was built without remote objects (libcurl and OpenSSL's libcrypto were not found, or "
         "FERRY_REMOTE=OFF); see docs/remote.md";
}
Result<Options> Options::from_environment() { return Options{}; }

Object::Object(std::unique_ptr<detail::ObjectState> state) : state_(std::move(state)) {}
Object::Object(Object&&) noexcept = default;
Object& Object::operator=(Object&&) noexcept = default;
Object::~Object() = default;
Result<Object> Object::open(std::string_view url, const Options&, std::string_view) { return unavailable_status(url); }
Result<std::uint64_t> Object::read(void*, std::uint64_t, std::uint64_t) { return unavailable_status(state_->url); }
std::uint64_t Object::size() const noexcept { return 0; }
const std::string& Object::etag() const noexcept { return state_->url; }
bool Object::ranges_supported() const noexcept { return false; }
const std::string& Object::url() const noexcept { return state_->url; }
const std::string& Object::request_url() const noexcept { return state_->url; }
const Options& Object::options() const noexcept { return state_->options; }
Counters Object::counters() const noexcept { return {}; }
Result<std::uint64_t> read(std::string_view url, void*, std::uint64_t, std::uint64_t, const Options&, Counters*) {
  return unavailable_status(url);
}
}  // namespace ferry::remote
