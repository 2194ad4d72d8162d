// main() of every C++ test program (unit, GPU, remote): gtest's, with the per-test leak check
// (support/leak_check.hpp) and a watchdog on every test (support/watchdog.hpp) listening. The GPU program is built with FERRY_TEST_MAIN_OPENS_CONTEXTS=1.
#include <gtest/gtest.h>

#include "support/leak_check.hpp"
#include "support/watchdog.hpp"

#ifndef FERRY_TEST_MAIN_OPENS_CONTEXTS
#define FERRY_TEST_MAIN_OPENS_CONTEXTS 0
#endif

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ferry::testing::open_process_drivers(FERRY_TEST_MAIN_OPENS_CONTEXTS != 0);
  // Appended after gtest's printer, so that its end-of-test check runs first (gtest reports the end of a test
  // to its listeners in reverse order) and a leak shows in the test's own result.
  ::testing::UnitTest::GetInstance()->listeners().Append(new ferry::testing::LeakCheck);
  ::testing::UnitTest::GetInstance()->listeners().Append(new ferry::testing::WatchdogPerTest);
  return RUN_ALL_TESTS();
}
