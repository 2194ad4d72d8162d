// ferry::remote against an S3-compatible server on loopback that checks SigV4 signatures (the
// @20minutes/s3rver fork; docs/remote.md says why this one): signed reads, wrong secrets, missing keys,
// keys that need percent-encoding, credentials from profile files.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/remote.hpp"
#include "remote/servers.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace {

using ferry::ErrorCode;
using ferry::remote::Object;
using ferry::remote::Options;
using ferry::testing::ScopedEnv;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kSize = (1 << 20) + 777;

class RemoteS3 : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ferry::testing::test_dir();
    std::filesystem::create_directories(dir_ / "src" / "dir");
    ferry::testing::write_pattern_file(dir_ / "src" / "dir" / "obj.bin", kSize);
    ferry::testing::write_pattern_file(dir_ / "src" / "dir" / "odd name+x=1&y (2).bin", 5000);
    if (auto why = s3_.start(dir_ / "s3", "bkt", dir_ / "src"); !why.empty()) GTEST_SKIP() << why;
    options_.connections = 3;
    options_.part_size_bytes = 128 << 10;
    options_.retry_base_delay_ms = 1;
    options_.retry_max_delay_ms = 2;
    options_.endpoint = s3_.endpoint();
    options_.region = "us-east-1";
  }

  void expect_whole(Object& o, std::uint64_t size) {
    std::vector<std::uint8_t> buf(size);
    auto got = o.read(buf.data(), size, 0);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(*got, size);
    EXPECT_EQ(std::memcmp(buf.data(), ferry::testing::pattern(0, size).data(), size), 0);
  }

  std::filesystem::path dir_;
  ferry::testing::S3Server s3_;
  Options options_;
  // Nothing from the machine's own AWS set-up takes part.
  ScopedEnv e1_{"AWS_ACCESS_KEY_ID", std::nullopt}, e2_{"AWS_SECRET_ACCESS_KEY", std::nullopt},
      e3_{"AWS_SESSION_TOKEN", std::nullopt}, e4_{"AWS_PROFILE", std::nullopt},
      e5_{"AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"}, e6_{"AWS_CONFIG_FILE", "/nonexistent/config"};
};

TEST_F(RemoteS3, ReadsASignedObjectPathStyle) {
  ScopedEnv id("AWS_ACCESS_KEY_ID", ferry::testing::S3Server::kAccessKey);
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", ferry::testing::S3Server::kSecretKey);
  auto o = Object::open("s3://bkt/dir/obj.bin", options_);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->size(), kSize);
  EXPECT_FALSE(o->etag().empty());
  EXPECT_EQ(o->url(), "s3://bkt/dir/obj.bin");
  EXPECT_EQ(o->request_url(), s3_.endpoint() + "/bkt/dir/obj.bin");
  expect_whole(*o, kSize);
  EXPECT_EQ(o->counters().retries, 0u);
}

TEST_F(RemoteS3, EndpointFromTheEnvironment) {
  ScopedEnv id("AWS_ACCESS_KEY_ID", ferry::testing::S3Server::kAccessKey);
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", ferry::testing::S3Server::kSecretKey);
  ScopedEnv endpoint("FERRY_S3_ENDPOINT", s3_.endpoint());
  options_.endpoint.clear();
  std::vector<std::uint8_t> buf(4096);
  auto got = ferry::remote::read("s3://bkt/dir/obj.bin", buf.data(), buf.size(), 1000, options_);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(std::memcmp(buf.data(), ferry::testing::pattern(1000, 4096).data(), 4096), 0);
}

TEST_F(RemoteS3, KeysThatNeedEncodingAreSignedAsSent) {
  options_.access_key_id = ferry::testing::S3Server::kAccessKey;
  options_.secret_access_key = ferry::testing::S3Server::kSecretKey;
  auto o = Object::open("s3://bkt/dir/odd name+x=1&y (2).bin", options_);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  expect_whole(*o, 5000);
}

TEST_F(RemoteS3, WrongSecretIsPermissionDeniedWithoutShowingIt) {
  options_.access_key_id = ferry::testing::S3Server::kAccessKey;
  options_.secret_access_key = "not-the-secret-123";
  auto o = Object::open("s3://bkt/dir/obj.bin", options_);
  ASSERT_THAT(o, StatusIs(ErrorCode::permission_denied));
  EXPECT_THAT(o.status().message(), HasSubstr("s3://bkt/dir/obj.bin"));
  EXPECT_THAT(o.status().message(), HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(o.status().to_string(), Not(HasSubstr("not-the-secret-123")));
}

TEST_F(RemoteS3, MissingKeyIsNotFound) {
  options_.access_key_id = ferry::testing::S3Server::kAccessKey;
  options_.secret_access_key = ferry::testing::S3Server::kSecretKey;
  auto o = Object::open("s3://bkt/dir/nothing.bin", options_);
  EXPECT_EQ(o.status().code(), ErrorCode::not_found);
  EXPECT_THAT(o.status().message(), HasSubstr("s3://bkt/dir/nothing.bin"));
}

TEST_F(RemoteS3, CredentialsAndRegionFromAProfile) {
  std::ofstream(dir_ / "credentials") << "[other]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n";
  std::ofstream(dir_ / "config") << "[profile other]\nregion = eu-west-3\nendpoint_url = " << s3_.endpoint() << "\n";
  ScopedEnv cf("AWS_SHARED_CREDENTIALS_FILE", (dir_ / "credentials").string());
  ScopedEnv cc("AWS_CONFIG_FILE", (dir_ / "config").string());
  ScopedEnv profile("AWS_PROFILE", "other");
  ScopedEnv r1("AWS_REGION", std::nullopt), r2("AWS_DEFAULT_REGION", std::nullopt);
  ScopedEnv p1("FERRY_S3_ENDPOINT", std::nullopt), p2("AWS_ENDPOINT_URL", std::nullopt),
      p3("AWS_ENDPOINT_URL_S3", std::nullopt);
  Options o = options_;
  o.endpoint.clear();
  o.region.clear();
  auto obj = Object::open("s3://bkt/dir/obj.bin", o);
  ASSERT_TRUE(obj.ok()) << obj.status().to_string();
  expect_whole(*obj, kSize);
}

}  // namespace
