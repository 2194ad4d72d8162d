// The safe output file of saves and `ferry write` (ferry_tooling/output_file.hpp): what it must not do to
// the rest of the process.
//
// Regression (issue 49, 1): a save read the umask by setting it to 0 and back (`umask(0); umask(m)`), so that
// files other threads created in that moment got mode 0666 (98 of 224,831 in 15 s of saves). The test binary
// counts calls of umask() (this file defines it and forwards to the C library's), and a new file must still
// get 0666 & ~umask. Fails on 189e30e: two calls a commit.
#include <dlfcn.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "ferry_tooling/output_file.hpp"
#include "support/test_files.hpp"

namespace {
std::atomic<int> g_umask_calls{0};
}

extern "C" mode_t umask(mode_t mask) {
  using Umask = mode_t (*)(mode_t);
  static const auto real = reinterpret_cast<Umask>(::dlsym(RTLD_NEXT, "umask"));
  g_umask_calls.fetch_add(1);
  return real(mask);
}

namespace ferry::tooling {
namespace {

TEST(OutputFile, ANewFileGetsTheUmaskWithoutTheProcessUmaskBeingTouched) {
  const auto dir = testing::test_dir();
  const mode_t before = ::umask(027);
  g_umask_calls = 0;
  const std::string path = (dir / "new.bin").string();
  ASSERT_TRUE(replace_file_contents(path, "data", /*durable=*/false).ok());
  const int calls = g_umask_calls.load();
  ::umask(before);
  EXPECT_EQ(calls, 0) << "a save set the process's umask, which every thread shares";
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

}  // namespace
}  // namespace ferry::tooling
