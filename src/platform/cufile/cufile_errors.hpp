// cuFile's error codes in words: the enumerator's name, and what the failure usually means on a real
// machine, so that a report says more than "5027".
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "ferry/status.hpp"
#include "platform/cufile/cufile_abi.hpp"

namespace ferry::detail {

/// "CU_FILE_HANDLE_NOT_REGISTERED" for 5027; "CU_FILE_SUCCESS" for 0; "unknown cuFile error" otherwise.
/// Accepts the negated form cuFileRead returns (-5027) too.
const char* cufile_error_name(int code) noexcept;

/// A sentence or two for people: what the error usually means and what to check. Accepts -code too.
const char* cufile_error_meaning(int code) noexcept;

/// True for codes in cuFile's own range (|code| > 5000), as opposed to errno values.
constexpr bool is_cufile_error_code(int code) noexcept {
  return code > kCuFileOpBaseError || code < -kCuFileOpBaseError;
}

/// "cuFileHandleRegister failed with cuFile error 5027 (CU_FILE_HANDLE_NOT_REGISTERED): <meaning>", plus
/// "; CUDA error N" when the code is CU_FILE_CUDA_DRIVER_ERROR and `cuda_code` is set, plus
/// "; cuFile log: <line>" when `log_line` is not empty. `path` is stored on the Status. The Status code is
/// `status_code`: unavailable by default (the environment said no); the data path passes io_error.
Status cufile_status(std::string_view what, int code, int cuda_code = 0, std::string_view log_line = {},
                     const std::string& path = {}, ErrorCode status_code = ErrorCode::unavailable);

}  // namespace ferry::detail
