// gMock matchers for Status and Result<T>, so a test states the error it expects in one line:
//
//   EXPECT_THAT(file->read(...), StatusIs(ErrorCode::io_error, HasSubstr("offset 4096")));
//   EXPECT_THAT(open_result, StatusIs(ErrorCode::not_found));
//
// The message matcher sees Status::message(), which has no errno text (to_string() appends that); check
// sys_errno() apart. A failed match explains itself with the whole status (to_string()), so the log shows
// what came instead.
#pragma once

#include <gmock/gmock.h>

#include <ostream>
#include <string>
#include <utility>

#include "ferry/status.hpp"

namespace ferry::testing {

namespace status_matchers_detail {

inline Status status_of(const Status& status) { return status; }
template <typename T>
Status status_of(const Result<T>& result) {
  return result.status();
}

class StatusIsMatcher {
 public:
  StatusIsMatcher(ErrorCode code, ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename StatusOrResult>
  bool MatchAndExplain(const StatusOrResult& value, ::testing::MatchResultListener* listener) const {
    Status status = status_of(value);
    if (status.code() != code_) {
      *listener << "whose status is " << describe(status);
      return false;
    }
    ::testing::StringMatchResultListener message_listener;
    if (!message_.MatchAndExplain(status.message(), &message_listener)) {
      *listener << "whose message does not match, in " << describe(status);
      if (!message_listener.str().empty()) *listener << " (" << message_listener.str() << ")";
      return false;
    }
    return true;
  }

  void DescribeTo(std::ostream* os) const {
    *os << "has code " << error_code_name(code_) << " and a message that ";
    message_.DescribeTo(os);
  }

  void DescribeNegationTo(std::ostream* os) const {
    *os << "has a code other than " << error_code_name(code_) << " or a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  static std::string describe(const Status& status) { return status.ok() ? "OK" : status.to_string(); }

  ErrorCode code_;
  ::testing::Matcher<const std::string&> message_;
};

}  // namespace status_matchers_detail

/// Matches a Status or Result<T> whose code is `code` and whose message() matches `message` (a string
/// matcher such as HasSubstr, or a string for equality). StatusIs(ErrorCode::ok) matches success.
template <typename MessageMatcher>
::testing::PolymorphicMatcher<status_matchers_detail::StatusIsMatcher> StatusIs(ErrorCode code,
                                                                                MessageMatcher&& message) {
  return ::testing::MakePolymorphicMatcher(status_matchers_detail::StatusIsMatcher(
      code, ::testing::Matcher<const std::string&>(std::forward<MessageMatcher>(message))));
}

/// Matches a Status or Result<T> whose code is `code`, whatever its message.
inline ::testing::PolymorphicMatcher<status_matchers_detail::StatusIsMatcher> StatusIs(ErrorCode code) {
  return StatusIs(code, ::testing::_);
}

}  // namespace ferry::testing
