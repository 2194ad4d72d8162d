// s3:// URLs through ferry::File against an S3-compatible server on loopback that checks SigV4 signatures
// (the @20minutes/s3rver fork; docs/remote.md says why this one): signed reads, wrong secrets, missing
// keys, keys that need percent-encoding, credentials from profile files (upper-case keys too).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/file.hpp"
#include "ferry/remote.hpp"
#include "remote/servers.hpp"
#include "support/status_matchers.hpp"
#include "support/test_files.hpp"

using ferry::testing::StatusIs;

namespace {

using ferry::Config;
using ferry::ErrorCode;
using ferry::File;
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
    config_.set_task_size(128 << 10);
    ferry::RemoteSettings r;
    r.connections = 3;
    r.retry_delay_ms = 1;
    r.retry_max_delay_ms = 2;
    r.s3_endpoint = s3_.endpoint();
    r.s3_region = "us-east-1";
    config_.set_remote(r);
  }

  void expect_whole(File& f, std::uint64_t size) {
    std::vector<std::uint8_t> buf(size);
    auto got = f.pread(buf.data(), size, 0).get();
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->bytes, size);
    EXPECT_EQ(std::memcmp(buf.data(), ferry::testing::pattern(0, size).data(), size), 0);
  }

  ferry::remote::Credentials s3rver_keys() const {
    return {ferry::testing::S3Server::kAccessKey, ferry::testing::S3Server::kSecretKey, ""};
  }

  std::filesystem::path dir_;
  ferry::testing::S3Server s3_;
  Config config_;
  // Nothing from the machine's own AWS set-up takes part.
  ScopedEnv e1_{"AWS_ACCESS_KEY_ID", std::nullopt}, e2_{"AWS_SECRET_ACCESS_KEY", std::nullopt},
      e3_{"AWS_SESSION_TOKEN", std::nullopt}, e4_{"AWS_PROFILE", std::nullopt},
      e5_{"AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"}, e6_{"AWS_CONFIG_FILE", "/nonexistent/config"};
};

TEST_F(RemoteS3, ReadsASignedObjectPathStyle) {
  ScopedEnv id("AWS_ACCESS_KEY_ID", ferry::testing::S3Server::kAccessKey);
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", ferry::testing::S3Server::kSecretKey);
  auto f = File::open("s3://bkt/dir/obj.bin", "r", config_);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*f->size(), kSize);
  EXPECT_EQ(f->path(), "s3://bkt/dir/obj.bin");
  expect_whole(*f, kSize);
  const std::string notes = f->report().table();
  EXPECT_THAT(notes, HasSubstr("signed with credentials from the environment"));
  EXPECT_THAT(notes, HasSubstr(" 0 retries"));
}

TEST_F(RemoteS3, EndpointFromTheEnvironment) {
  ScopedEnv endpoint("FERRY_S3_ENDPOINT", s3_.endpoint());
  auto config = Config::from_environment();
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->remote().s3_endpoint, s3_.endpoint());
  auto f = ferry::remote::open("s3://bkt/dir/obj.bin", s3rver_keys(), *config);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  std::vector<std::uint8_t> buf(4096);
  auto got = f->pread(buf.data(), buf.size(), 1000).get();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(std::memcmp(buf.data(), ferry::testing::pattern(1000, 4096).data(), 4096), 0);
}

TEST_F(RemoteS3, KeysThatNeedEncodingAreSignedAsSent) {
  auto f = ferry::remote::open("s3://bkt/dir/odd name+x=1&y (2).bin", s3rver_keys(), config_);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  expect_whole(*f, 5000);
}

TEST_F(RemoteS3, WrongSecretIsPermissionDeniedWithoutShowingIt) {
  auto f = ferry::remote::open("s3://bkt/dir/obj.bin", {ferry::testing::S3Server::kAccessKey, "not-the-secret-123", ""},
                               config_);
  ASSERT_THAT(f, StatusIs(ErrorCode::permission_denied));
  EXPECT_THAT(f.status().message(), HasSubstr("s3://bkt/dir/obj.bin"));
  EXPECT_THAT(f.status().message(), HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(f.status().to_string(), Not(HasSubstr("not-the-secret-123")));
}

TEST_F(RemoteS3, MissingKeyIsNotFound) {
  auto f = ferry::remote::open("s3://bkt/dir/nothing.bin", s3rver_keys(), config_);
  EXPECT_EQ(f.status().code(), ErrorCode::not_found);
  EXPECT_THAT(f.status().message(), HasSubstr("s3://bkt/dir/nothing.bin"));
}

TEST_F(RemoteS3, CredentialsAndRegionFromAProfileWithUpperCaseKeys) {
  std::ofstream(dir_ / "credentials") << "[other]\nAWS_ACCESS_KEY_ID = S3RVER\nAws_Secret_Access_Key = S3RVER\n";
  std::ofstream(dir_ / "config") << "[profile other]\nregion = eu-west-3\nendpoint_url = " << s3_.endpoint() << "\n";
  ScopedEnv cf("AWS_SHARED_CREDENTIALS_FILE", (dir_ / "credentials").string());
  ScopedEnv cc("AWS_CONFIG_FILE", (dir_ / "config").string());
  ScopedEnv profile("AWS_PROFILE", "other");
  ScopedEnv r1("AWS_REGION", std::nullopt), r2("AWS_DEFAULT_REGION", std::nullopt);
  ScopedEnv p2("AWS_ENDPOINT_URL", std::nullopt), p3("AWS_ENDPOINT_URL_S3", std::nullopt);
  Config c = config_;
  ferry::RemoteSettings r = c.remote();
  r.s3_endpoint.clear();
  r.s3_region.clear();
  c.set_remote(r);
  auto f = File::open("s3://bkt/dir/obj.bin", "r", c);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  expect_whole(*f, kSize);
}

}  // namespace
