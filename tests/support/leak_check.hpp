// The per-test leak check of every C++ test program (support/test_main.cpp installs it): a test that ends with
// more file descriptors open, or more pinned host memory held, than it started with fails, naming what it
// left behind. The liburing habit of checking the machine's health after each test, in-process.
//
// Counted: every descriptor of /proc/self/fd, named by what it refers to; pinned bytes of the staging pool's
// kits (pinned_memory_use().pinned_bytes, real or fake driver) once its idle kits, which it keeps for the
// process by design, are freed; and the fake driver's live pinned and registered bytes (fake_cuda.hpp).
// Process-wide resources made once on first use and kept on purpose are not leaks; each is listed, with the
// reason, in leak_check.cpp.
// Thread safety: gtest calls the listener on the main thread, between tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

namespace ferry::testing {

class LeakCheck : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo& test) override;
  /// Fails the test (ADD_FAILURE, before gtest prints its result) for each descriptor or pinned byte left.
  void OnTestEnd(const ::testing::TestInfo& test) override;

 private:
  std::map<int, std::string> descriptors_;  // at the start of the test: fd -> what it refers to
  std::uint64_t fake_pinned_bytes_ = 0;
};

/// Starts what the drivers keep for the life of the process, before the first test, so that the check does not
/// charge it to whichever test happens to start it: the CUDA driver (cuInit's descriptors) where one is
/// installed and, with `contexts`, every device's primary context (the GPU test program's main()).
void open_process_drivers(bool contexts);

/// The open descriptors of this process: fd -> the target of /proc/self/fd/N ("/path", "pipe:[123]", ...).
std::map<int, std::string> open_descriptors();

}  // namespace ferry::testing
