// From `s3://bucket/key` and the settings to an HTTP request target: region, endpoint and addressing
// style, and the credentials that sign it (Options, then the environment, then ~/.aws/credentials and
// ~/.aws/config for the profile). docs/remote.md lists the order; this file is its implementation.
// Thread safety: resolve_s3() reads the environment and files; call it while nobody changes them.
#pragma once

#include <string>

#include "ferry/remote.hpp"
#include "remote/sigv4.hpp"
#include "remote/url.hpp"

namespace ferry::detail::remote {

struct S3Target {
  S3Url object;
  std::string region;
  std::string endpoint;         ///< scheme://authority the requests go to (bucket included for virtual hosts)
  std::string endpoint_source;  ///< "default", "FERRY_S3_ENDPOINT", "options", ...
  ferry::remote::Addressing addressing = ferry::remote::Addressing::path;  ///< path or virtual_host
  HttpUrl url;                  ///< the request URL, split; url.path is the canonical URI
  std::string request_url;      ///< what curl fetches
  Credentials credentials;      ///< empty: unsigned requests
};

/// Errors: `invalid_argument` (bad URL or endpoint, an AWS_PROFILE named but found in neither file,
/// half a key pair).
Result<S3Target> resolve_s3(std::string_view url, const ferry::remote::Options& options);

/// The sections of an AWS-style INI file: section name -> key -> value. Comments start with '#' or ';'.
/// Returns false when the file cannot be read.
bool parse_aws_ini(const std::string& path, std::vector<std::pair<std::string, std::vector<Header>>>& sections);

}  // namespace ferry::detail::remote
