// ferry::remote in a build without libcurl or libcrypto (FERRY_REMOTE=OFF, or AUTO without them): a URL
// opens as `unavailable`, saying why. CMakeLists.txt compiles this file instead of the rest of src/remote.
#include "ferry/remote.hpp"
#include "remote/remote_source.hpp"

namespace ferry {
namespace {
Status unavailable_status(std::string_view url) {
  const std::string shown = remote::display_url(url);
  return Status(ErrorCode::unavailable, "Cannot open \"" + shown + "\": " + remote::unavailable_reason(), 0, shown);
}
}  // namespace

namespace remote {
bool is_remote_url(std::string_view path) noexcept {
  return path.rfind("http://", 0) == 0 || path.rfind("https://", 0) == 0 || path.rfind("s3://", 0) == 0;
}
std::string display_url(std::string_view url) {
  if (!is_remote_url(url)) return std::string(url);
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
}  // namespace remote

namespace detail {
Result<std::shared_ptr<Source>> open_remote_source(const std::string& url, std::string_view, const RemoteSettings&,
                                                   const ferry::remote::Credentials*) {
  return unavailable_status(url);
}
}  // namespace detail
}  // namespace ferry
