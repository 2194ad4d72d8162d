// From `s3://bucket/key` and the settings to an HTTP request target: region, endpoint and addressing
// style, and the credentials that sign it (given in code, then the environment, then ~/.aws/credentials
// and ~/.aws/config for the profile). docs/remote.md lists the order; this file is its implementation.
// Thread safety: resolve_s3() reads the environment and files; call it while nobody changes them.
#pragma once

#include <string>

#include "ferry/config.hpp"
#include "ferry/remote.hpp"
#include "remote/sigv4.hpp"
#include "remote/url.hpp"

namespace ferry::detail::remote {

struct S3Target {
  S3Url object;
  std::string region;
  std::string endpoint;         ///< scheme://authority the requests go to (bucket included for virtual hosts)
  std::string endpoint_source;  ///< "default", "s3_endpoint", "AWS_ENDPOINT_URL", ...
  S3Addressing addressing = S3Addressing::path;  ///< path or virtual_host
  HttpUrl url;                  ///< the request URL, split; url.path is the canonical URI
  std::string request_url;      ///< what curl fetches
  Credentials credentials;      ///< empty: unsigned requests
  std::string note;             ///< for the report: where the credentials came from, or why there are none
};

/// `given`, when not null, are the credentials to sign with (ferry::remote::open). Errors:
/// `invalid_argument` (bad URL or endpoint; a profile named by s3_profile or AWS_PROFILE that is in neither
/// file, or that holds no credentials while s3_anonymous is off; half a key pair; virtual-host addressing
/// for a bucket name that cannot be a host name).
Result<S3Target> resolve_s3(std::string_view url, const RemoteSettings& settings,
                            const ferry::remote::Credentials* given = nullptr);

/// The sections of an AWS-style INI file: section name -> key -> value, keys in lower case (the AWS tools
/// read `AWS_ACCESS_KEY_ID = ...` as `aws_access_key_id`). Comments start with '#' or ';'. Returns false
/// when the file cannot be read.
bool parse_aws_ini(const std::string& path, std::vector<std::pair<std::string, std::vector<Header>>>& sections);

}  // namespace ferry::detail::remote
