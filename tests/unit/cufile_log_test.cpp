// cuFile's log: where Ferry points it (issue 10: not a predictable name in a shared directory).
#include "platform/cufile/cufile_log.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace {

namespace fd = ferry::detail;
using ::testing::HasSubstr;

// Issue 10: the log was a predictable name in a shared /tmp, which another user could plant as a symlink
// (cuFile would write through it, Ferry would quote whatever it pointed at). Now it lives in a directory
// only this user can enter, made fresh by this process.
TEST(CuFileLog, LivesInAPrivateDirectoryOfItsOwn) {
  if (std::getenv(fd::kCuFileLogVariable) != nullptr) GTEST_SKIP() << "CUFILE_LOGFILE_PATH is set by the caller";
  std::string path = fd::cufile_log_path();
  ASSERT_FALSE(path.empty());
  std::string dir = path.substr(0, path.rfind('/'));
  struct stat st {};
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0) << dir;
  EXPECT_TRUE(S_ISDIR(st.st_mode)) << dir;
  EXPECT_EQ(st.st_mode & 07777, 0700u) << dir;
  EXPECT_EQ(st.st_uid, ::geteuid()) << dir;
  // Lines written there are read back; a symlink put in its place is not followed.
  {
    std::ofstream out(path, std::ios::app);
    out << "ERROR cufio-udev:2 udev property not found: ID_FS_USAGE\n";
  }
  EXPECT_THAT(fd::cufile_failure_reason(fd::cufile_log_tail(5)).value_or(""), HasSubstr("ID_FS_USAGE"));
  std::string secret = dir + "/../ferry-cufile-test-secret-" + std::to_string(::getpid());
  { std::ofstream(secret) << "ERROR not cuFile's words\n"; }
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink(secret.c_str(), path.c_str()), 0);
  EXPECT_TRUE(fd::cufile_log_tail(5).empty());
  EXPECT_EQ(fd::cufile_log_size(), 0u);
  ::unlink(path.c_str());
  ::unlink(secret.c_str());
}

}  // namespace
