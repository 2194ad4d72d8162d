#include "remote/s3_target.hpp"

#include <cstdlib>
#include <fstream>

#include "base/ascii.hpp"

namespace ferry::detail::remote {
namespace {

using Addressing = S3Addressing;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}


std::string home_file(const char* override_var, const char* relative) {
  if (std::string v = env(override_var); !v.empty()) return v;
  const std::string home = env("HOME");
  return home.empty() ? std::string() : home + "/" + relative;
}

// The keys of one profile: in the credentials file the section is "name"; in the config file it is
// "profile name", except "default".
const std::vector<Header>* find_profile(const std::vector<std::pair<std::string, std::vector<Header>>>& sections,
                                        const std::string& profile, bool config_file) {
  for (const auto& [name, keys] : sections) {
    if (name == profile) return &keys;
    if (config_file && name == "profile " + profile) return &keys;
  }
  return nullptr;
}

std::string lookup(const std::vector<Header>* keys, const std::string& key) {
  if (!keys) return {};
  for (const auto& [k, v] : *keys) {
    if (k == key) return v;
  }
  return {};
}

}  // namespace

bool parse_aws_ini(const std::string& path, std::vector<std::pair<std::string, std::vector<Header>>>& sections) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    line = std::string(trim_ascii(line));
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      sections.emplace_back(std::string(trim_ascii(line.substr(1, line.size() - 2))), std::vector<Header>{});
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos || sections.empty()) continue;  // nested (indented) values are not needed here
    std::string key(trim_ascii(line.substr(0, eq)));
    for (char& c : key) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    sections.back().second.emplace_back(std::move(key), std::string(trim_ascii(line.substr(eq + 1))));
  }
  return true;
}

Result<S3Target> resolve_s3(std::string_view url, const RemoteSettings& settings,
                            const ferry::remote::Credentials* given) {
  S3Target t;
  FERRY_ASSIGN_OR_RETURN(t.object, parse_s3_url(url));
  const std::string shown = display_form(url);
  auto bad = [&](const std::string& why) {
    return Status(ErrorCode::invalid_argument, "Cannot open \"" + shown + "\": " + why, 0, shown);
  };

  // The profile and its files.
  const std::string named = !settings.s3_profile.empty() ? settings.s3_profile : env("AWS_PROFILE");
  const std::string named_by = !settings.s3_profile.empty() ? "s3_profile" : "AWS_PROFILE";
  const std::string profile = named.empty() ? std::string("default") : named;
  const std::string credentials_path = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  const std::string config_path = home_file("AWS_CONFIG_FILE", ".aws/config");
  std::vector<std::pair<std::string, std::vector<Header>>> cred_sections, config_sections;
  if (!credentials_path.empty()) parse_aws_ini(credentials_path, cred_sections);
  if (!config_path.empty()) parse_aws_ini(config_path, config_sections);
  const auto* cred_profile = find_profile(cred_sections, profile, false);
  const auto* config_profile = find_profile(config_sections, profile, true);
  if (!named.empty() && !cred_profile && !config_profile) {
    return bad("AWS profile \"" + profile + "\" (" + named_by + ") is in neither " + credentials_path + " nor " +
               config_path);
  }

  // Region.
  t.region = settings.s3_region;
  if (t.region.empty()) t.region = env("AWS_REGION");
  if (t.region.empty()) t.region = env("AWS_DEFAULT_REGION");
  if (t.region.empty()) t.region = lookup(config_profile, "region");
  if (t.region.empty()) t.region = "us-east-1";

  // Endpoint: the setting (FERRY_S3_ENDPOINT), then what the AWS tools read.
  std::string endpoint = settings.s3_endpoint;
  t.endpoint_source = "s3_endpoint";
  for (const char* var : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (!endpoint.empty()) break;
    endpoint = env(var);
    t.endpoint_source = var;
  }
  if (endpoint.empty()) {
    endpoint = lookup(config_profile, "endpoint_url");
    t.endpoint_source = "profile " + profile + " endpoint_url";
  }
  const bool overridden = !endpoint.empty();
  if (!overridden) {
    endpoint = "https://s3." + t.region + ".amazonaws.com";
    t.endpoint_source = "default";
  }
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  auto parsed = parse_http_url(endpoint);
  if (!parsed.ok()) return bad("bad S3 endpoint (from " + t.endpoint_source + "): " + parsed.status().message());
  HttpUrl base = std::move(parsed).value();

  // Addressing: a bucket in the host name must be a host name label.
  const bool dns_name = dns_compatible_bucket(t.object.bucket);
  t.addressing = settings.s3_addressing;
  if (t.addressing == Addressing::automatic) {
    t.addressing = overridden || t.object.bucket.find('.') != std::string::npos || !dns_name ? Addressing::path
                                                                                              : Addressing::virtual_host;
  }
  if (t.addressing == Addressing::virtual_host && !dns_name) {
    return bad("s3_addressing=virtual_host needs a bucket name that can be a host name (3-63 lower-case letters, "
               "digits, '-' and '.', not an IP address); use s3_addressing=path");
  }
  std::string prefix = base.path == "/" ? std::string() : base.path;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  const std::string key_path = "/" + uri_encode(t.object.key, true);
  if (t.addressing == Addressing::path) {
    t.url = base;
    t.url.path = prefix + "/" + uri_encode(t.object.bucket, false) + key_path;
  } else {
    t.url = base;
    t.url.host = t.object.bucket + "." + base.host;
    t.url.authority = t.object.bucket + "." + base.authority;
    t.url.path = prefix + key_path;
  }
  t.url.query.clear();
  t.endpoint = t.url.scheme + "://" + t.url.authority;
  t.request_url = t.endpoint + t.url.path;

  // Credentials: given in code, environment, credentials file, config file.
  if (settings.s3_anonymous) {
    t.note = "S3 requests unsigned: s3_anonymous is on";
    return t;
  }
  Credentials& c = t.credentials;
  if (given && !given->access_key_id.empty()) {
    c = {given->access_key_id, given->secret_access_key, given->session_token, "the credentials given in code"};
  } else if (!env("AWS_ACCESS_KEY_ID").empty()) {
    c = {env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"), env("AWS_SESSION_TOKEN"), "the environment"};
  } else if (!lookup(cred_profile, "aws_access_key_id").empty()) {
    c = {lookup(cred_profile, "aws_access_key_id"), lookup(cred_profile, "aws_secret_access_key"),
         lookup(cred_profile, "aws_session_token"), credentials_path + " [" + profile + "]"};
  } else if (!lookup(config_profile, "aws_access_key_id").empty()) {
    c = {lookup(config_profile, "aws_access_key_id"), lookup(config_profile, "aws_secret_access_key"),
         lookup(config_profile, "aws_session_token"), config_path + " [" + profile + "]"};
  }
  if (!c.empty() && c.secret_access_key.empty()) {
    return bad("an access key id from " + c.source + " without its secret access key");
  }
  if (c.empty() && !named.empty()) {
    // A profile asked for by name is meant to sign: unsigned requests would fail (or succeed) for
    // reasons nobody sees.
    return bad("AWS profile \"" + profile + "\" (" + named_by + ") holds no aws_access_key_id in " +
               credentials_path + " or " + config_path + "; set s3_anonymous=on for unsigned requests");
  }
  t.note = c.empty() ? "S3 requests unsigned: no credentials in the environment (AWS_ACCESS_KEY_ID) or in the "
                       "default profile of " + credentials_path + " and " + config_path
                     : "S3 requests signed with credentials from " + c.source;
  return t;
}

}  // namespace ferry::detail::remote
