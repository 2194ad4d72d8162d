#include "platform/cufile/cufile_errors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace fd = ferry::detail;
using ::testing::HasSubstr;

TEST(CuFileErrors, NamesEveryCodeInTheHeader) {
  EXPECT_STREQ(fd::cufile_error_name(0), "CU_FILE_SUCCESS");
  EXPECT_STREQ(fd::cufile_error_name(5001), "CU_FILE_DRIVER_NOT_INITIALIZED");
  EXPECT_STREQ(fd::cufile_error_name(5011), "CU_FILE_CUDA_DRIVER_ERROR");
  EXPECT_STREQ(fd::cufile_error_name(5027), "CU_FILE_HANDLE_NOT_REGISTERED");
  EXPECT_STREQ(fd::cufile_error_name(5030), "CU_FILE_INTERNAL_ERROR");
  EXPECT_STREQ(fd::cufile_error_name(5049), "CU_FILE_BATCH_NOCOMPAT_ERROR");
  for (int code = 5001; code <= 5049; ++code) {
    if (code == 5021 || code == 5032) continue;  // gaps in cuFile's numbering
    EXPECT_STRNE(fd::cufile_error_name(code), "unknown cuFile error") << code;
    EXPECT_STRNE(fd::cufile_error_meaning(code), "") << code;
  }
}

TEST(CuFileErrors, AcceptsTheNegatedFormReadReturns) {
  EXPECT_STREQ(fd::cufile_error_name(-5027), "CU_FILE_HANDLE_NOT_REGISTERED");
  EXPECT_STREQ(fd::cufile_error_meaning(-5044), fd::cufile_error_meaning(5044));
}

TEST(CuFileErrors, UnknownCodesSaySo) {
  EXPECT_STREQ(fd::cufile_error_name(5021), "unknown cuFile error");
  EXPECT_STREQ(fd::cufile_error_name(12345), "unknown cuFile error");
  EXPECT_THAT(fd::cufile_error_meaning(12345), HasSubstr("does not know"));
}

TEST(CuFileErrors, HandleNotRegisteredExplainsTheUdevCause) {
  std::string meaning = fd::cufile_error_meaning(5027);
  EXPECT_THAT(meaning, HasSubstr("udev"));
  EXPECT_THAT(meaning, HasSubstr("ID_FS_USAGE"));
}

TEST(CuFileErrors, TellsCuFileCodesFromErrno) {
  EXPECT_TRUE(fd::is_cufile_error_code(5027));
  EXPECT_TRUE(fd::is_cufile_error_code(-5027));
  EXPECT_FALSE(fd::is_cufile_error_code(-5));   // -EIO
  EXPECT_FALSE(fd::is_cufile_error_code(5000));  // the base itself is no error
}

TEST(CuFileErrors, StatusCarriesCodeNameMeaningAndLogLine) {
  ferry::Status s = fd::cufile_status("cuFileHandleRegister", 5027, 0, "udev property not found: ID_FS_USAGE",
                                      "/data/x.bin");
  EXPECT_EQ(s.code(), ferry::ErrorCode::unavailable);
  EXPECT_THAT(s.message(), HasSubstr("cuFileHandleRegister failed with cuFile error 5027 (CU_FILE_HANDLE_NOT_REGISTERED): "));
  EXPECT_THAT(s.message(), HasSubstr("; cuFile log: udev property not found: ID_FS_USAGE"));
  EXPECT_EQ(s.path(), "/data/x.bin");
}

TEST(CuFileErrors, CudaDriverErrorsNameTheCudaCode) {
  ferry::Status s = fd::cufile_status("cuFileDriverOpen", 5011, 100);
  EXPECT_THAT(s.message(), HasSubstr("5011 (CU_FILE_CUDA_DRIVER_ERROR)"));
  EXPECT_THAT(s.message(), HasSubstr("CUDA error 100"));
}

TEST(CuFileErrors, DataPathStatusUsesTheGivenCode) {
  ferry::Status s = fd::cufile_status("Could not read 4096 bytes", -5044, 0, {}, "/f", ferry::ErrorCode::io_error);
  EXPECT_EQ(s.code(), ferry::ErrorCode::io_error);
  EXPECT_THAT(s.message(), HasSubstr("cuFile error 5044 (CU_FILE_IO_ERROR)"));
}
