// main() of every C++ test program (unit, GPU, remote): gtest's, with the per-test leak check
// (support/leak_check.hpp) listening.
#include <gtest/gtest.h>

#include "support/leak_check.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Appended after gtest's printer, so that its end-of-test check runs first (gtest reports the end of a test
  // to its listeners in reverse order) and a leak shows in the test's own result.
  ::testing::UnitTest::GetInstance()->listeners().Append(new ferry::testing::LeakCheck);
  return RUN_ALL_TESTS();
}
