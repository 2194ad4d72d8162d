// ferry::remote without a server: URLs and their display form, bucket names, SigV4 against AWS's published
// example, Content-Range parsing, ETags, server text, S3 targets and credentials from code, environment and
// ~/.aws files, and the remote settings in the settings table.
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/config.hpp"
#include "ferry/remote.hpp"
#include "remote/http_transfer.hpp"
#include "remote/object.hpp"
#include "remote/s3_target.hpp"
#include "remote/sigv4.hpp"
#include "remote/url.hpp"
#include "support/test_files.hpp"

namespace {

using namespace ferry::detail::remote;
using ferry::ErrorCode;
using ferry::testing::ScopedEnv;
using ::testing::HasSubstr;
using ::testing::Not;

// Every variable resolve_s3() reads, unset for the test.
struct CleanAwsEnv {
  ScopedEnv a{"AWS_ACCESS_KEY_ID", std::nullopt}, b{"AWS_SECRET_ACCESS_KEY", std::nullopt},
      c{"AWS_SESSION_TOKEN", std::nullopt}, d{"AWS_REGION", std::nullopt}, e{"AWS_DEFAULT_REGION", std::nullopt},
      f{"AWS_PROFILE", std::nullopt}, g{"AWS_ENDPOINT_URL", std::nullopt}, h{"AWS_ENDPOINT_URL_S3", std::nullopt},
      j{"AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"},
      k{"AWS_CONFIG_FILE", "/nonexistent/config"};
};

TEST(RemoteUrl, DisplayFormDropsCredentialsQueryAndFragment) {
  EXPECT_EQ(display_form("https://user:pw@host.example:8443/a/b.bin?X-Amz-Signature=abc#f"),
            "https://host.example:8443/a/b.bin");
  EXPECT_EQ(display_form("http://host/a?b"), "http://host/a");
  EXPECT_EQ(display_form("s3://bucket/key with space"), "s3://bucket/key with space");
  EXPECT_EQ(ferry::remote::display_url("http://u@h/p"), "http://h/p");
  EXPECT_EQ(ferry::remote::display_url("dir/what?#.bin"), "dir/what?#.bin");  // a path keeps its name
}

TEST(RemoteUrl, ControlBytesAndNulAreRefused) {
  EXPECT_THAT(parse_http_url(std::string("http://h/a\0b", 12)).status().message(), HasSubstr("NUL byte"));
  EXPECT_THAT(parse_http_url("http://h/a\x1b[31m").status().message(), HasSubstr("control byte"));
  EXPECT_THAT(parse_s3_url(std::string("s3://b/k\0x", 10)).status().message(), HasSubstr("NUL byte"));
}

// Issue 23: `s3://2130706433:18084#/k` sent signed requests to 127.0.0.1:18084 (virtual-host style).
TEST(RemoteUrl, BucketNamesOutsideS3sRulesAreRefused) {
  for (const char* url : {"s3://2130706433:18084#/key", "s3://user:pw@bkt/k", "s3://-bkt/k", "s3://bkt-/k",
                          "s3://b%2Fx/k", "s3://b k/k"}) {
    auto u = parse_s3_url(url);
    EXPECT_EQ(u.status().code(), ErrorCode::invalid_argument) << url;
    EXPECT_THAT(u.status().message(), HasSubstr("bucket name")) << url;
    EXPECT_THAT(u.status().message(), Not(HasSubstr("pw"))) << url;
  }
  EXPECT_TRUE(parse_s3_url("s3://Legacy_Bucket.1/k").ok());  // path style still reaches such buckets
  EXPECT_TRUE(dns_compatible_bucket("my-bucket.v2"));
  EXPECT_FALSE(dns_compatible_bucket("Legacy_Bucket"));
  EXPECT_FALSE(dns_compatible_bucket("a..b"));
  EXPECT_FALSE(dns_compatible_bucket("192.168.5.4"));
  EXPECT_FALSE(dns_compatible_bucket("ab"));
}

TEST(RemoteUrl, SplitsHttpUrls) {
  auto u = parse_http_url("HTTP://User:pw@Example.COM:80/a%20b/c?x=1#frag");
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "example.com");
  EXPECT_EQ(u->authority, "example.com");  // the default port is not part of Host
  EXPECT_EQ(u->path, "/a%20b/c");
  EXPECT_EQ(u->query, "x=1");
  EXPECT_TRUE(u->has_userinfo);
  auto v = parse_http_url("https://[::1]:9000");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->authority, "[::1]:9000");
  EXPECT_EQ(v->path, "/");
  auto bad = parse_http_url("http://host:99999/x");
  EXPECT_EQ(bad.status().code(), ErrorCode::invalid_argument);
  EXPECT_THAT(bad.status().message(), HasSubstr("bad port"));
}

TEST(RemoteUrl, S3UrlsNeedBucketAndKey) {
  EXPECT_EQ(parse_s3_url("s3://bucket").status().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(parse_s3_url("s3:///key").status().code(), ErrorCode::invalid_argument);
  auto u = parse_s3_url("s3://bucket/dir/key%20x");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->key, "dir/key%20x");  // literal, as the AWS CLI takes it
  EXPECT_EQ(uri_encode(u->key, true), "dir/key%2520x");
}

TEST(RemoteUrl, RecognisesRemoteSchemes) {
  EXPECT_TRUE(ferry::remote::is_remote_url("S3://b/k"));
  EXPECT_TRUE(ferry::remote::is_remote_url("https://h/p"));
  EXPECT_FALSE(ferry::remote::is_remote_url("/data/x.bin"));
  EXPECT_FALSE(ferry::remote::is_remote_url("file:///x"));
}

// The "GET Object" example of AWS's Signature Version 4 documentation for S3 (header-based auth).
TEST(SigV4, MatchesTheAwsDocumentationExample) {
  SigningInput in;
  in.method = "GET";
  in.canonical_uri = "/test.txt";
  in.host = "examplebucket.s3.amazonaws.com";
  in.region = "us-east-1";
  in.amz_date = "20130524T000000Z";
  in.headers = {{"range", "bytes=0-9"}};
  Credentials c{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", "test"};
  std::string canonical, to_sign;
  auto headers = sign(in, c, &canonical, &to_sign);
  EXPECT_EQ(sha256_hex(canonical), "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  std::string auth;
  for (const auto& [n, v] : headers) {
    if (n == "authorization") auth = v;
  }
  EXPECT_EQ(auth,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, SignsTheSessionTokenAndNeverShowsTheSecret) {
  SigningInput in;
  in.method = "HEAD";
  in.canonical_uri = "/b/k";
  in.host = "127.0.0.1:9000";
  in.region = "eu-west-1";
  in.amz_date = "20260101T000000Z";
  Credentials c{"AK", "very-secret", "token-1", "test"};
  std::string canonical, to_sign;
  auto headers = sign(in, c, &canonical, &to_sign);
  EXPECT_THAT(canonical, HasSubstr("x-amz-security-token:token-1\n"));
  EXPECT_THAT(canonical, HasSubstr("host;x-amz-content-sha256;x-amz-date;x-amz-security-token"));
  for (const auto& [n, v] : headers) EXPECT_THAT(v, Not(HasSubstr("very-secret")));
}

TEST(ContentRange, ParsesAndRejects) {
  std::uint64_t a = 0, b = 0, t = 0;
  EXPECT_TRUE(parse_content_range("bytes 0-9/100", a, b, t));
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 9u);
  EXPECT_EQ(t, 100u);
  EXPECT_TRUE(parse_content_range("bytes 5-9/*", a, b, t));
  EXPECT_EQ(t, kUnknownSize);
  EXPECT_TRUE(parse_content_range("bytes */0", a, b, t));
  EXPECT_EQ(t, 0u);
  EXPECT_FALSE(parse_content_range("bytes 9-5/100", a, b, t));
  EXPECT_FALSE(parse_content_range("bytes 0-100/100", a, b, t));
  EXPECT_FALSE(parse_content_range("items 0-1/2", a, b, t));
  EXPECT_FALSE(parse_content_range("bytes 0-x/2", a, b, t));
}

TEST(S3Target, DefaultIsVirtualHostOnAws) {
  CleanAwsEnv clean;
  auto t = resolve_s3("s3://my-bucket/a/b c.bin", {});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->region, "us-east-1");
  EXPECT_EQ(t->request_url, "https://my-bucket.s3.us-east-1.amazonaws.com/a/b%20c.bin");
  EXPECT_TRUE(t->credentials.empty());  // none anywhere: unsigned
  auto dotted = resolve_s3("s3://my.bucket/k", {});
  ASSERT_TRUE(dotted.ok());
  EXPECT_EQ(dotted->request_url, "https://s3.us-east-1.amazonaws.com/my.bucket/k");
}

TEST(S3Target, EndpointOverrideMeansPathStyleAndTheSettingWins) {
  CleanAwsEnv clean;
  ScopedEnv aws("AWS_ENDPOINT_URL", "http://127.0.0.1:1111");
  ScopedEnv region("AWS_DEFAULT_REGION", "eu-central-1");
  auto a = resolve_s3("s3://bkt/k", {});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->request_url, "http://127.0.0.1:1111/bkt/k");
  EXPECT_EQ(a->endpoint_source, "AWS_ENDPOINT_URL");
  ferry::RemoteSettings s;
  s.s3_endpoint = "http://127.0.0.1:2222/";
  auto t = resolve_s3("s3://bkt/k", s);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->request_url, "http://127.0.0.1:2222/bkt/k");
  EXPECT_EQ(t->endpoint_source, "s3_endpoint");
  EXPECT_EQ(t->region, "eu-central-1");
  s.s3_addressing = ferry::S3Addressing::virtual_host;
  s.s3_region = "ap-south-1";
  auto v = resolve_s3("s3://bkt/k", s);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->request_url, "http://bkt.127.0.0.1:2222/k");
  EXPECT_EQ(v->region, "ap-south-1");
  auto legacy = resolve_s3("s3://Legacy_Bucket/k", s);  // cannot be a host name
  EXPECT_EQ(legacy.status().code(), ErrorCode::invalid_argument);
  EXPECT_THAT(legacy.status().message(), HasSubstr("s3_addressing=path"));
}

TEST(S3Target, CredentialsFromEnvironmentThenProfileFiles) {
  CleanAwsEnv clean;
  const auto dir = ferry::testing::test_dir();
  std::ofstream(dir / "credentials") << "[default]\naws_access_key_id = DEF\naws_secret_access_key = defsecret\n"
                                     << "# comment\n[team]\nAWS_ACCESS_KEY_ID=TEAM\naws_secret_access_key=teamsecret\n"
                                     << "Aws_Session_Token = tok\n[bare]\nregion = eu-west-1\n";
  std::ofstream(dir / "config") << "[default]\nregion = us-west-2\n[profile team]\nregion = eu-north-1\n"
                                << "endpoint_url = http://127.0.0.1:3333\n";
  ScopedEnv cf("AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").string());
  ScopedEnv cc("AWS_CONFIG_FILE", (dir / "config").string());
  auto d = resolve_s3("s3://b/k", {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->credentials.access_key_id, "DEF");
  EXPECT_EQ(d->region, "us-west-2");
  {
    ScopedEnv p("AWS_PROFILE", "team");
    auto t = resolve_s3("s3://b/k", {});
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->credentials.access_key_id, "TEAM");
    EXPECT_EQ(t->credentials.session_token, "tok");
    EXPECT_EQ(t->region, "eu-north-1");
    EXPECT_EQ(t->request_url, "http://127.0.0.1:3333/b/k");
  }
  {
    ScopedEnv id("AWS_ACCESS_KEY_ID", "ENVKEY");
    ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "envsecret");
    auto e = resolve_s3("s3://b/k", {});
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->credentials.access_key_id, "ENVKEY");
    EXPECT_EQ(e->credentials.source, "the environment");
    EXPECT_THAT(e->note, HasSubstr("signed with credentials from the environment"));
  }
  {
    // A profile named on purpose that holds no keys: refused, not sent unsigned without a word.
    ScopedEnv p("AWS_PROFILE", "bare");
    auto bare = resolve_s3("s3://b/k", {});
    EXPECT_EQ(bare.status().code(), ErrorCode::invalid_argument);
    EXPECT_THAT(bare.status().message(), HasSubstr("\"bare\" (AWS_PROFILE) holds no aws_access_key_id"));
  }
  {
    ferry::remote::Credentials given{"CODEKEY", "codesecret", ""};
    auto g = resolve_s3("s3://b/k", {}, &given);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->credentials.access_key_id, "CODEKEY");
    ferry::remote::Credentials half{"CODEKEY", "", ""};
    EXPECT_THAT(resolve_s3("s3://b/k", {}, &half).status().message(), HasSubstr("without its secret access key"));
  }
  {
    ScopedEnv p("AWS_PROFILE", "nobody");
    auto missing = resolve_s3("s3://b/k", {});
    EXPECT_EQ(missing.status().code(), ErrorCode::invalid_argument);
    EXPECT_THAT(missing.status().message(), HasSubstr("\"nobody\""));
  }
  ferry::RemoteSettings anon;
  anon.s3_anonymous = true;
  auto a = resolve_s3("s3://b/k", anon);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->credentials.empty());
  EXPECT_THAT(a->note, HasSubstr("unsigned"));
}

// Issue 24: the remote settings are rows of the one settings table, with its parsers and messages (the old
// parser refused FERRY_REMOTE_PART_SIZE=8MiB while FERRY_TASK_SIZE=8MiB was accepted).
TEST(RemoteSettings, AreRowsOfTheSettingsTable) {
  ScopedEnv c("FERRY_REMOTE_CONNECTIONS", "16");
  ScopedEnv r("FERRY_REMOTE_MIN_RATE", "1MiB");
  ScopedEnv a("FERRY_S3_ADDRESSING", "virtual_host");
  ScopedEnv t("FERRY_REMOTE_VERIFY_TLS", "off");
  auto config = ferry::Config::from_environment();
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->remote().connections, 16u);
  EXPECT_EQ(config->remote().min_rate, 1u << 20);
  EXPECT_EQ(config->remote().s3_addressing, ferry::S3Addressing::virtual_host);
  EXPECT_FALSE(config->remote().verify_tls);
  EXPECT_EQ(config->source("remote_connections"), ferry::SettingSource::environment);
  EXPECT_EQ(config->get("s3_addressing"), "virtual_host");
  ScopedEnv bad("FERRY_REMOTE_MAX_RETRIES", "lots");
  auto b = ferry::Config::from_environment();
  EXPECT_EQ(b.status().code(), ErrorCode::invalid_argument);
  EXPECT_THAT(b.status().message(), HasSubstr("FERRY_REMOTE_MAX_RETRIES: cannot use \"lots\" (expected a whole number from 0 to 100)"));
  ferry::Config api;
  EXPECT_THAT(api.set("remote_connections", "0").message(), HasSubstr("from 1 to 256"));
  EXPECT_THAT(api.set("s3_endpoint", "127.0.0.1:9000").message(), HasSubstr("an http:// or https:// URL"));
  EXPECT_TRUE(api.set("s3_endpoint", "http://127.0.0.1:9000").ok());
  EXPECT_EQ(api.source("s3_endpoint"), ferry::SettingSource::api);
  for (const auto& row : ferry::settings_table()) {
    EXPECT_EQ(row.name.find("secret"), std::string::npos);  // credentials are never settings
  }
}

TEST(RemoteObject, WritesAndLocalPathsAreRefused) {
  auto o = Object::open("s3://b/k", "w", {});
  EXPECT_EQ(o.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(o.status().message(), HasSubstr("remote writes are not supported yet"));
  EXPECT_EQ(Object::open("/local/file", "r", {}).status().code(), ErrorCode::invalid_argument);
}

// Issue 23: a weak ETag in If-Match never matches (strict servers answered 412 to every read); an object
// whose HEAD had no ETag takes the first answer's, and later answers must match it.
TEST(Etags, WeakOnesAreNotSentAndTheFirstAnswerNamesTheVersion) {
  EXPECT_TRUE(is_strong_etag("\"v1\""));
  EXPECT_FALSE(is_strong_etag("W/\"v1\""));
  EXPECT_FALSE(is_strong_etag(""));
  EtagGuard g;
  EXPECT_FALSE(g.mismatch("\"v1\"").has_value());  // adopted
  EXPECT_EQ(g.current(), "\"v1\"");
  EXPECT_FALSE(g.mismatch("W/\"v1\"").has_value());  // the same version, compared weakly
  EXPECT_EQ(g.mismatch("\"v2\"").value_or(""), "\"v1\"");
}

// Issue 23: status texts and S3 messages with terminal escapes reached stderr raw.
TEST(ServerText, ControlBytesAreEscaped) {
  EXPECT_EQ(printable("Forbidden \x1b[31mred\x07"), "Forbidden \\x1b[31mred\\x07");
  EXPECT_EQ(printable("a\\b"), "a\\x5cb");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 stays
}

}  // namespace
