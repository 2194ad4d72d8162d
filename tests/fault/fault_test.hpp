// The fixture of the fault tests (tests/fault): a directory of the test's own, a script of system calls
// (ScriptedSyscalls) that files are opened through, the settings the scripts are written for (tasks of
// kTask), and destinations that show which bytes a request wrote.
//
//   using FaultEio = testing::FaultTest;
//   TEST_F(FaultEio, ...) {
//     auto path = testing::write_pattern_file(dir_ / "d.bin", 4 * kTask);
//     sys_.add(Rule::on(Op::pread).covering(kTask).fail(EIO));
//     auto file = open(path, "r", fault_config(DirectIo::off));
//     SentinelBuffer buf(4 * kTask);
//     ... EXPECT_TRUE(buf.holds(0, r->bytes));
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/host_memory.hpp"
#include "ferry/ferry.hpp"
#include "file/open_options.hpp"
#include "support/scripted_syscalls.hpp"
#include "support/test_files.hpp"

namespace ferry::testing {

class FaultTest : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kTask = 64 * 1024;

  /// Tasks of kTask bytes on `threads` workers, with `direct` as the O_DIRECT policy.
  static Config fault_config(DirectIo direct = DirectIo::off, unsigned threads = 4) {
    Config c;
    c.set_task_size(kTask).set_threads(threads).set_direct_io(direct);
    return c;
  }

  /// `path` opened with `mode` and `config`, its system calls going through `sys` (default: this test's).
  Result<File> open(const std::string& path, std::string_view mode, const Config& config,
                    ScriptedSyscalls* sys = nullptr) {
    return detail::open_file(path, mode, config, detail::OpenOptions{.syscalls = sys ? sys : &sys_});
  }

  std::filesystem::path dir_ = test_dir();
  ScriptedSyscalls sys_;
};

/// Page-aligned host memory (O_DIRECT can read into it) of `size` bytes, each kSentinel until written.
class SentinelBuffer {
 public:
  static constexpr std::uint8_t kSentinel = 0x5A;

  explicit SentinelBuffer(std::uint64_t size) : size_(size), memory_(detail::HostMemory::allocate(size).value()) {
    std::memset(memory_.data(), kSentinel, size);
  }
  std::uint8_t* data() { return memory_.data(); }

  /// The first `count` bytes are the pattern of file offsets [offset, offset + count) and every byte after
  /// them is still kSentinel: the request wrote its bytes, where they belong, and nothing past them.
  ::testing::AssertionResult holds(std::uint64_t offset, std::uint64_t count) const {
    for (std::uint64_t i = 0; i < size_; ++i) {
      const std::uint8_t want = i < count ? pattern_byte(offset + i) : kSentinel;
      if (memory_.data()[i] != want) {
        return ::testing::AssertionFailure() << "byte " << i << " is " << int(memory_.data()[i]) << ", expected "
                                             << int(want) << " (" << count << " bytes from file offset " << offset
                                             << ")";
      }
    }
    return ::testing::AssertionSuccess();
  }

 private:
  std::uint64_t size_;
  detail::HostMemory memory_;
};

}  // namespace ferry::testing
