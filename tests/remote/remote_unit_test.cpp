// ferry::remote without a server: URLs and their display form, SigV4 against AWS's published example,
// Content-Range parsing, S3 targets and credentials from options, environment and ~/.aws files.
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/remote.hpp"
#include "remote/http_transfer.hpp"
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
      i{"FERRY_S3_ENDPOINT", std::nullopt}, j{"AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"},
      k{"AWS_CONFIG_FILE", "/nonexistent/config"};
};

TEST(RemoteUrl, DisplayFormDropsCredentialsQueryAndFragment) {
  EXPECT_EQ(display_form("https://user:pw@host.example:8443/a/b.bin?X-Amz-Signature=abc#f"),
            "https://host.example:8443/a/b.bin");
  EXPECT_EQ(display_form("http://host/a?b"), "http://host/a");
  EXPECT_EQ(display_form("s3://bucket/key with space"), "s3://bucket/key with space");
  EXPECT_EQ(ferry::remote::display_url("http://u@h/p"), "http://h/p");
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

TEST(S3Target, EndpointOverrideMeansPathStyleAndFerryVariableWins) {
  CleanAwsEnv clean;
  ScopedEnv aws("AWS_ENDPOINT_URL", "http://127.0.0.1:1111");
  ScopedEnv ferry_ep("FERRY_S3_ENDPOINT", "http://127.0.0.1:2222/");
  ScopedEnv region("AWS_DEFAULT_REGION", "eu-central-1");
  auto t = resolve_s3("s3://bkt/k", {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->request_url, "http://127.0.0.1:2222/bkt/k");
  EXPECT_EQ(t->endpoint_source, "FERRY_S3_ENDPOINT");
  EXPECT_EQ(t->region, "eu-central-1");
  ferry::remote::Options o;
  o.addressing = ferry::remote::Addressing::virtual_host;
  o.region = "ap-south-1";
  auto v = resolve_s3("s3://bkt/k", o);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->request_url, "http://bkt.127.0.0.1:2222/k");
  EXPECT_EQ(v->region, "ap-south-1");
}

TEST(S3Target, CredentialsFromEnvironmentThenProfileFiles) {
  CleanAwsEnv clean;
  const auto dir = ferry::testing::test_dir();
  std::ofstream(dir / "credentials") << "[default]\naws_access_key_id = DEF\naws_secret_access_key = defsecret\n"
                                     << "# comment\n[team]\naws_access_key_id=TEAM\naws_secret_access_key=teamsecret\n"
                                     << "aws_session_token = tok\n";
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
    EXPECT_EQ(e->credentials.source, "environment");
  }
  {
    ScopedEnv p("AWS_PROFILE", "nobody");
    auto missing = resolve_s3("s3://b/k", {});
    EXPECT_EQ(missing.status().code(), ErrorCode::invalid_argument);
    EXPECT_THAT(missing.status().message(), HasSubstr("\"nobody\""));
  }
  ferry::remote::Options anon;
  anon.anonymous = true;
  auto a = resolve_s3("s3://b/k", anon);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->credentials.empty());
}

TEST(RemoteOptions, FromEnvironmentParsesAndRefuses) {
  ScopedEnv c("FERRY_REMOTE_CONNECTIONS", "16");
  ScopedEnv p("FERRY_REMOTE_PART_SIZE", "4M");
  ScopedEnv a("FERRY_S3_ADDRESSING", "virtual_host");
  auto o = ferry::remote::Options::from_environment();
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->connections, 16u);
  EXPECT_EQ(o->part_size_bytes, 4u << 20);
  EXPECT_EQ(o->addressing, ferry::remote::Addressing::virtual_host);
  ScopedEnv bad("FERRY_REMOTE_MAX_RETRIES", "lots");
  auto b = ferry::remote::Options::from_environment();
  EXPECT_EQ(b.status().code(), ErrorCode::invalid_argument);
  EXPECT_THAT(b.status().message(), HasSubstr("FERRY_REMOTE_MAX_RETRIES=\"lots\""));
}

TEST(RemoteObject, WritesAreRefused) {
  auto o = ferry::remote::Object::open("s3://b/k", {}, "w");
  EXPECT_EQ(o.status().code(), ErrorCode::failed_precondition);
  EXPECT_THAT(o.status().message(), HasSubstr("remote writes are not supported yet"));
  EXPECT_EQ(ferry::remote::Object::open("/local/file", {}).status().code(), ErrorCode::invalid_argument);
}

}  // namespace
