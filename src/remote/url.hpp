// URL pieces for remote objects: splitting http(s) and s3 URLs, their display form (no credentials, no
// query), and the percent-encoding that S3 and SigV4 use. No I/O here.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/status.hpp"

namespace ferry::detail::remote {

/// An absolute http(s) URL, split. `authority` is host[:port] as the Host header carries it: the port is
/// dropped when it is the scheme's default.
struct HttpUrl {
  std::string scheme;     ///< "http" or "https", lower case
  std::string host;       ///< without brackets for IPv6
  std::string authority;  ///< Host header value
  std::uint16_t port = 0;
  std::string path;       ///< from the first '/', "/" when empty; as written (already encoded)
  std::string query;      ///< after '?', without it; may be empty
  bool has_userinfo = false;
};

/// Splits an http(s) URL. Errors: `invalid_argument` naming the display form of the URL (also for control
/// bytes anywhere in it: libcurl would cut the URL at a NUL, and refuses the others).
Result<HttpUrl> parse_http_url(std::string_view url);

/// `s3://bucket/key`, split; the key is taken literally (no percent-decoding), as the AWS CLI does.
struct S3Url {
  std::string bucket;
  std::string key;
};

/// Errors: `invalid_argument` for a missing bucket or key, a NUL byte, or a bucket name of other bytes than
/// S3's letters, digits, '.', '-' and '_' (so that no name can reach another host or port:
/// `s3://2130706433:18084#/k`) or not starting and ending with a letter or digit.
Result<S3Url> parse_s3_url(std::string_view url);

/// Whether `bucket` can be a host name label as virtual-host addressing needs: S3's rules for new
/// buckets (3-63 lower-case letters, digits, '-' and '.', no "..", not an IPv4 address).
bool dns_compatible_bucket(std::string_view bucket);

/// The URL without user name, password, query string or fragment; anything without a scheme (a path) as
/// it is.
std::string display_form(std::string_view url);

/// Lower-cased scheme ("http", "https", "s3", ...) or empty when `url` has none.
std::string scheme_of(std::string_view url);

/// RFC 3986 percent-encoding as SigV4 wants it: unreserved characters (A-Z a-z 0-9 - _ . ~) stay, every
/// other byte becomes %XX (upper-case hex); '/' stays when `keep_slash`.
std::string uri_encode(std::string_view text, bool keep_slash);

}  // namespace ferry::detail::remote
