#include "remote/sigv4.hpp"

#include <algorithm>
#include <ctime>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/ascii.hpp"

namespace ferry::detail::remote {

const char kEmptyPayloadSha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

namespace {

std::string to_hex(const unsigned char* data, unsigned size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (unsigned i = 0; i < size; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 15];
  }
  return out;
}

std::string hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &size);
  return std::string(reinterpret_cast<const char*>(out), size);
}

std::string trim(const std::string& s) {
  // Sequential spaces inside a value become one, as the canonical form requires.
  std::string out;
  bool space = false;
  for (const char c : trim_ascii(s)) {
    if (c == ' ' || c == '\t') {
      if (!space) out += ' ';
      space = true;
    } else {
      out += c;
      space = false;
    }
  }
  return out;
}

}  // namespace

std::string sha256_hex(const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  EVP_Digest(data.data(), data.size(), out, &size, EVP_sha256(), nullptr);
  return to_hex(out, size);
}

std::string amz_date_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  return text;
}

std::vector<Header> sign(const SigningInput& input, const Credentials& credentials, std::string* canonical_request,
                         std::string* string_to_sign) {
  std::vector<Header> headers = input.headers;
  headers.emplace_back("host", input.host);
  headers.emplace_back("x-amz-content-sha256", kEmptyPayloadSha256);
  headers.emplace_back("x-amz-date", input.amz_date);
  if (!credentials.session_token.empty()) headers.emplace_back("x-amz-security-token", credentials.session_token);
  std::sort(headers.begin(), headers.end());

  std::string canonical_headers, signed_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers += name + ":" + trim(value) + "\n";
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += name;
  }
  const std::string request = input.method + "\n" + input.canonical_uri + "\n" + input.canonical_query + "\n" +
                              canonical_headers + "\n" + signed_headers + "\n" + kEmptyPayloadSha256;
  const std::string date = input.amz_date.substr(0, 8);
  const std::string scope = date + "/" + input.region + "/" + input.service + "/aws4_request";
  const std::string to_sign = "AWS4-HMAC-SHA256\n" + input.amz_date + "\n" + scope + "\n" + sha256_hex(request);

  const std::string k_date = hmac("AWS4" + credentials.secret_access_key, date);
  const std::string k_region = hmac(k_date, input.region);
  const std::string k_service = hmac(k_region, input.service);
  const std::string k_signing = hmac(k_service, "aws4_request");
  const std::string mac = hmac(k_signing, to_sign);
  const std::string signature = to_hex(reinterpret_cast<const unsigned char*>(mac.data()), static_cast<unsigned>(mac.size()));

  if (canonical_request) *canonical_request = request;
  if (string_to_sign) *string_to_sign = to_sign;
  std::vector<Header> out;
  for (auto& h : headers) {
    if (std::find_if(input.headers.begin(), input.headers.end(), [&](const Header& given) { return given.first == h.first; }) ==
        input.headers.end()) {
      out.push_back(h);
    }
  }
  out.emplace_back("authorization", "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + "/" + scope +
                                        ", SignedHeaders=" + signed_headers + ", Signature=" + signature);
  return out;
}

}  // namespace ferry::detail::remote
