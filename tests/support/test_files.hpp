// Test helpers: per-test directories under the build tree, files with known contents, environment
// overrides that undo themselves.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ferry::testing {

/// A fresh directory for the running test: <build>/tests/tmp/<suite>.<test>, emptied on creation.
/// Never /tmp, which may be tmpfs and refuse O_DIRECT.
std::filesystem::path test_dir();

/// The byte at `offset` of the pattern files: varies with every byte position, so a misplaced chunk
/// (off by a task, off by a page) cannot compare equal.
inline std::uint8_t pattern_byte(std::uint64_t offset) {
  std::uint64_t x = offset * 0x9E3779B97F4A7C15ull;
  return static_cast<std::uint8_t>((x >> 56) ^ (offset >> 12) ^ offset);
}
std::vector<std::uint8_t> pattern(std::uint64_t offset, std::uint64_t size);
/// Writes `size` pattern bytes to `path` (created or truncated) and returns the path as a string.
std::string write_pattern_file(const std::filesystem::path& path, std::uint64_t size);
std::vector<std::uint8_t> read_whole_file(const std::filesystem::path& path);

/// Sets (or, with nullopt, unsets) an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace ferry::testing
