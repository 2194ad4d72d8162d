// Test helpers: directories, pattern files, environment overrides.
#include "support/test_files.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace ferry::testing {

std::filesystem::path test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "no-test";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  std::filesystem::path dir = std::filesystem::path(FERRY_TEST_TMP_ROOT) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<std::uint8_t> pattern(std::uint64_t offset, std::uint64_t size) {
  std::vector<std::uint8_t> out(size);
  for (std::uint64_t i = 0; i < size; ++i) out[i] = pattern_byte(offset + i);
  return out;
}

std::string write_pattern_file(const std::filesystem::path& path, std::uint64_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  constexpr std::uint64_t kChunk = 1 << 20;
  for (std::uint64_t at = 0; at < size; at += kChunk) {
    auto bytes = pattern(at, std::min(kChunk, size - at));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  return path.string();
}

std::vector<std::uint8_t> read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

ScopedEnv::ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) old_ = old;
  if (value) {
    ::setenv(name_.c_str(), value->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

ScopedEnv::~ScopedEnv() {
  if (old_) {
    ::setenv(name_.c_str(), old_->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

}  // namespace ferry::testing
