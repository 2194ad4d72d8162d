// AWS Signature Version 4 for S3 requests without a body (GET, HEAD), in the Authorization header.
// The algorithm is AWS's published one: a canonical request, a string to sign, a key derived from the
// secret by four HMAC-SHA256 steps (date, region, service, "aws4_request"), and the hex signature.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ferry::detail::remote {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  ///< empty unless temporary credentials
  std::string source;         ///< where they came from ("environment", "~/.aws/credentials [p]"), for reports
  bool empty() const { return access_key_id.empty(); }
};

/// One header of a request: lower-case name, value.
using Header = std::pair<std::string, std::string>;

/// What sign() needs besides the credentials.
struct SigningInput {
  std::string method;           ///< "GET", "HEAD"
  std::string canonical_uri;    ///< the path exactly as sent, already percent-encoded
  std::string canonical_query;  ///< sorted, encoded name=value pairs joined by '&'; empty for none
  std::string host;             ///< the Host header's value
  std::string region;
  std::string service = "s3";
  std::string amz_date;         ///< YYYYMMDD'T'HHMMSS'Z'
  std::vector<Header> headers;  ///< further headers to sign (range, ...), lower-case names
};

/// The SHA-256 of an empty body, hex: what GET and HEAD send as x-amz-content-sha256.
extern const char kEmptyPayloadSha256[];

/// The headers to add to the request: host, x-amz-date, x-amz-content-sha256, x-amz-security-token (with a
/// session token) and authorization. `canonical_request` and `string_to_sign`, when given, receive the
/// intermediate texts (for tests and debugging; they hold no secret).
std::vector<Header> sign(const SigningInput& input, const Credentials& credentials,
                         std::string* canonical_request = nullptr, std::string* string_to_sign = nullptr);

/// The current UTC time as SigV4's x-amz-date.
std::string amz_date_now();

/// Hex SHA-256 of `data`.
std::string sha256_hex(const std::string& data);

}  // namespace ferry::detail::remote
