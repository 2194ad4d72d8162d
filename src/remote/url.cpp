#include "remote/url.hpp"

#include <algorithm>
#include <charconv>

#include "base/ascii.hpp"

namespace ferry::detail::remote {
namespace {

// ASCII only, whatever the process's locale (Python sets LC_CTYPE from the environment).
bool ascii_alnum(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

std::string scheme_of(std::string_view url) {
  const auto colon = url.find("://");
  if (colon == std::string_view::npos || colon == 0) return {};
  for (char c : url.substr(0, colon)) {
    if (!ascii_alnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return {};
  }
  return ascii_lower(url.substr(0, colon));
}

std::string display_form(std::string_view url) {
  if (scheme_of(url).empty()) return std::string(url);  // a path: '?' and '#' are part of its name
  const auto cut = url.find_first_of("?#");
  if (cut != std::string_view::npos) url = url.substr(0, cut);
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const auto rest = scheme_end + 3;
  const auto path_start = url.find('/', rest);
  const auto authority = url.substr(rest, path_start == std::string_view::npos ? std::string_view::npos : path_start - rest);
  const auto at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  std::string out(url.substr(0, rest));
  out += authority.substr(at + 1);
  if (path_start != std::string_view::npos) out += url.substr(path_start);
  return out;
}

Result<HttpUrl> parse_http_url(std::string_view url) {
  const std::string shown = display_form(url);
  auto bad = [&](const std::string& why) {
    return Status(ErrorCode::invalid_argument, "Invalid URL \"" + shown + "\": " + why, 0, shown);
  };
  for (unsigned char c : url) {
    if (c < 0x20 || c == 0x7f) return bad(c == 0 ? "it contains a NUL byte" : "it contains a control byte");
  }
  HttpUrl out;
  out.scheme = scheme_of(url);
  if (out.scheme != "http" && out.scheme != "https") return bad("the scheme must be http or https");
  std::string_view rest = url.substr(url.find("://") + 3);
  if (const auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  const auto path_start = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, path_start);
  std::string_view tail = path_start == std::string_view::npos ? std::string_view{} : rest.substr(path_start);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    out.has_userinfo = true;
    authority = authority.substr(at + 1);
  }
  if (authority.empty()) return bad("no host");
  std::string_view host = authority, port_text;
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("unterminated IPv6 address");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("junk after the IPv6 address");
      port_text = after.substr(1);
    }
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
  }
  if (host.empty()) return bad("no host");
  const std::uint16_t default_port = out.scheme == "https" ? 443 : 80;
  out.port = default_port;
  if (!port_text.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 || value > 65535) {
      return bad("bad port \"" + std::string(port_text) + "\"");
    }
    out.port = static_cast<std::uint16_t>(value);
  }
  out.host = ascii_lower(host);
  const bool ipv6 = authority.front() == '[';
  out.authority = ipv6 ? "[" + out.host + "]" : out.host;
  if (out.port != default_port) out.authority += ":" + std::to_string(out.port);
  const auto q = tail.find('?');
  out.path = std::string(tail.substr(0, q));
  if (out.path.empty()) out.path = "/";
  if (q != std::string_view::npos) out.query = std::string(tail.substr(q + 1));
  return out;
}

Result<S3Url> parse_s3_url(std::string_view url) {
  const std::string shown = display_form(url);
  if (scheme_of(url) != "s3") {
    return Status(ErrorCode::invalid_argument, "Invalid URL \"" + shown + "\": not an s3:// URL", 0, shown);
  }
  std::string_view rest = url.substr(5);
  const auto slash = rest.find('/');
  S3Url out;
  out.bucket = std::string(rest.substr(0, slash));
  if (out.bucket.empty()) {
    return Status(ErrorCode::invalid_argument, "Invalid URL \"" + shown + "\": no bucket (expected s3://bucket/key)", 0,
                  shown);
  }
  const bool ends_ok =
      ascii_alnum(static_cast<unsigned char>(out.bucket.front())) && ascii_alnum(static_cast<unsigned char>(out.bucket.back()));
  const bool allowed = std::all_of(out.bucket.begin(), out.bucket.end(), [](unsigned char c) {
    return ascii_alnum(c) || c == '.' || c == '-' || c == '_';
  });
  if (!allowed || !ends_ok || out.bucket.size() > 255) {
    // The name itself is not quoted: it may hold anything, a password before an '@' included.
    return Status(ErrorCode::invalid_argument,
                  "Invalid URL \"" + shown + "\": its bucket name is not one S3 allows (at most 255 letters, digits, "
                  "'.', '-' and '_', starting and ending with a letter or digit)",
                  0, shown);
  }
  if (url.find('\0') != std::string_view::npos) {
    return Status(ErrorCode::invalid_argument, "Invalid URL \"" + shown + "\": it contains a NUL byte", 0, shown);
  }
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    return Status(ErrorCode::invalid_argument, "Invalid URL \"" + shown + "\": no key (expected s3://bucket/key)", 0,
                  shown);
  }
  out.key = std::string(rest.substr(slash + 1));
  return out;
}

bool dns_compatible_bucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63 || bucket.find("..") != std::string_view::npos) return false;
  for (unsigned char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) return false;
  }
  const auto alnum_end = [](unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum_end(bucket.front()) || !alnum_end(bucket.back())) return false;
  // "192.168.5.4" is refused by S3: four dot-separated numbers.
  int dots = 0;
  bool digits_and_dots = true;
  for (unsigned char c : bucket) {
    dots += c == '.';
    digits_and_dots &= (c >= '0' && c <= '9') || c == '.';
  }
  return !(digits_and_dots && dots == 3);
}

std::string uri_encode(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (ascii_alnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace ferry::detail::remote
