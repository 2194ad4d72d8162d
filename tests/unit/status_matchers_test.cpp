// The StatusIs matcher (tests/support/status_matchers.hpp) that other tests rely on to state errors.
#include "support/status_matchers.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

namespace {

using ferry::ErrorCode;
using ferry::Result;
using ferry::Status;
using ferry::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

template <typename Value, typename Matcher>
std::string explain(const Value& value, const Matcher& matcher) {
  ::testing::StringMatchResultListener listener;
  ::testing::Matcher<const Value&>(matcher).MatchAndExplain(value, &listener);
  return listener.str();
}

TEST(StatusIs, MatchesCodeAndMessageOfStatus) {
  Status status(ErrorCode::io_error, "Could not read 4096 bytes at offset 8192 from \"/d/x.bin\"", EIO, "/d/x.bin");
  EXPECT_THAT(status, StatusIs(ErrorCode::io_error));
  EXPECT_THAT(status, StatusIs(ErrorCode::io_error, HasSubstr("offset 8192")));
  EXPECT_THAT(status, Not(StatusIs(ErrorCode::not_found)));
  EXPECT_THAT(status, Not(StatusIs(ErrorCode::io_error, HasSubstr("offset 4096"))));
}

TEST(StatusIs, MatchesResultsOfAnyType) {
  Result<int> failed = Status(ErrorCode::not_found, "no such file \"a.bin\"");
  Result<int> value = 7;
  EXPECT_THAT(failed, StatusIs(ErrorCode::not_found, HasSubstr("a.bin")));
  EXPECT_THAT(value, StatusIs(ErrorCode::ok));
  EXPECT_THAT(value, Not(StatusIs(ErrorCode::not_found)));
}

TEST(StatusIs, TakesAPlainStringForAnExactMessage) {
  Status status(ErrorCode::cancelled, "cancelled");
  EXPECT_THAT(status, StatusIs(ErrorCode::cancelled, "cancelled"));
  EXPECT_THAT(status, StatusIs(ErrorCode::cancelled, std::string("cancelled")));
  EXPECT_THAT(status, Not(StatusIs(ErrorCode::cancelled, "cancel")));
}

TEST(StatusIs, SeesTheMessageWithoutErrnoText) {
  Status status = Status::from_errno(ENOSPC, "Could not write 1 byte");
  EXPECT_THAT(status, StatusIs(ErrorCode::no_space, "Could not write 1 byte"));
}

TEST(StatusIs, ExplainsAMismatchWithTheWholeStatus) {
  Status status(ErrorCode::permission_denied, "Could not open \"/x\"");
  EXPECT_THAT(explain(status, StatusIs(ErrorCode::not_found)),
              HasSubstr("permission_denied: Could not open \"/x\""));
  EXPECT_THAT(explain(status, StatusIs(ErrorCode::permission_denied, HasSubstr("/y"))),
              HasSubstr("whose message does not match"));
  EXPECT_THAT(explain(Status(), StatusIs(ErrorCode::not_found)), HasSubstr("OK"));
}

}  // namespace
