// errno values appear by name in messages (issue 10: "errno 40" instead of ELOOP).
#include <gtest/gtest.h>

#include <cerrno>

#include "ferry/status.hpp"

namespace {

TEST(ErrnoName, NamesTheErrnosFileOperationsMeet) {
  const std::pair<int, const char*> kNames[] = {
      {ELOOP, "ELOOP"},     {ETXTBSY, "ETXTBSY"},   {EROFS, "EROFS"},           {EFBIG, "EFBIG"},
      {EOVERFLOW, "EOVERFLOW"}, {ENAMETOOLONG, "ENAMETOOLONG"}, {ENXIO, "ENXIO"}, {ESPIPE, "ESPIPE"},
      {EPIPE, "EPIPE"},     {ENODEV, "ENODEV"},     {EOPNOTSUPP, "EOPNOTSUPP"}, {EXDEV, "EXDEV"},
      {EMFILE, "EMFILE"},   {ENFILE, "ENFILE"},     {EEXIST, "EEXIST"},         {ENOTEMPTY, "ENOTEMPTY"},
      {EACCES, "EACCES"},   {EPERM, "EPERM"},       {EIO, "EIO"},               {ENOSPC, "ENOSPC"},
      {EDQUOT, "EDQUOT"},   {EINTR, "EINTR"},       {EAGAIN, "EAGAIN"},         {ESTALE, "ESTALE"},
  };
  for (const auto& [e, name] : kNames) EXPECT_EQ(ferry::errno_name(e), name) << e;
}

TEST(ErrnoName, UnknownValuesStayNumbers) { EXPECT_EQ(ferry::errno_name(100000), "errno 100000"); }

TEST(ErrnoName, MessagesCarryTheName) {
  auto s = ferry::Status::from_errno(ELOOP, "Could not open \"/d/link\"", "/d/link");
  EXPECT_NE(s.to_string().find("(ELOOP)"), std::string::npos) << s.to_string();
}

}  // namespace
