// ferry/status.hpp: error values used across Ferry's C++ API.
//
// Failures are values (EIO, ENOSPC and EOF are expected outcomes of I/O, and the router carries on with the
// reason intact): `Status` (one null pointer when OK), and `Result<T>`, a value or a non-OK Status like
// C++23 std::expected. Exceptions appear only at the edges (the CLI and the Python module).
// Thread safety: Status and Result are values; distinct objects may be used from distinct threads.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace ferry {

/// Canonical error codes (Abseil's names, snake_case, plus LevelDB's io_error). `internal` means a bug in
/// Ferry, never a property of the environment.
enum class ErrorCode {
  ok = 0,
  invalid_argument,
  not_found,
  already_exists,
  permission_denied,
  is_a_directory,
  out_of_range,
  unavailable,
  failed_precondition,
  io_error,
  no_space,
  cancelled,
  internal,
};

/// The snake_case name of a code, as shown in messages, JSON and Python.
const char* error_code_name(ErrorCode code) noexcept;

/// The outcome of an operation: OK, or a code with a message and optional fields (errno, path).
class [[nodiscard]] Status {
 public:
  Status() noexcept = default;  // OK
  Status(ErrorCode code, std::string message, int sys_errno = 0, std::string path = {});

  /// Maps an errno value onto a code (ENOENT -> not_found, EACCES -> permission_denied, ENOSPC ->
  /// no_space, EIO -> io_error, ...). The message should say what was being done; the errno's text and
  /// symbolic name are appended by to_string().
  static Status from_errno(int sys_errno, std::string message, std::string path = {});

  bool ok() const noexcept { return rep_ == nullptr; }
  ErrorCode code() const noexcept { return rep_ ? rep_->code : ErrorCode::ok; }
  /// The message without the errno text; empty when OK.
  const std::string& message() const noexcept;
  /// errno behind the failure, or 0 when there was none.
  int sys_errno() const noexcept { return rep_ ? rep_->sys_errno : 0; }
  /// The file the failure concerns, or empty.
  const std::string& path() const noexcept;

  /// "io_error: Could not read 4194304 bytes at offset 8388608 from "/d/x.bin": Input/output error (EIO)"
  std::string to_string() const;

 private:
  struct Rep {
    ErrorCode code;
    std::string message;
    int sys_errno;
    std::string path;
  };
  std::shared_ptr<const Rep> rep_;
};

/// The symbolic name of an errno value ("EIO", "ENOSPC"), or "errno N" when unknown.
std::string errno_name(int sys_errno);

namespace detail {
[[noreturn]] void abort_with_status(const Status& s);
}  // namespace detail

/// A value or an error. Accessing value() of an error Result is a bug (it aborts with the status).
template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::decay_t<T>, Status>, "Result<Status> is meaningless");

 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like std::expected
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(ErrorCode::internal, "Result built from an OK status");
  }

  bool ok() const noexcept { return std::holds_alternative<T>(v_); }
  explicit operator bool() const noexcept { return ok(); }

  /// OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { check(); return std::get<T>(v_); }
  const T& value() const& { check(); return std::get<T>(v_); }
  T&& value() && { check(); return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check() const {
    if (!ok()) detail::abort_with_status(std::get<Status>(v_));
  }
  std::variant<T, Status> v_;
};

}  // namespace ferry

#define FERRY_CONCAT_INNER_(a, b) a##b
#define FERRY_CONCAT_(a, b) FERRY_CONCAT_INNER_(a, b)

/// Returns the status from the enclosing function when `expr` (a Status) is not OK.
#define FERRY_RETURN_IF_ERROR(expr)             \
  do {                                          \
    ::ferry::Status ferry_status_ = (expr);     \
    if (!ferry_status_.ok()) return ferry_status_; \
  } while (0)

/// `FERRY_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a Result, or returns its error.
#define FERRY_ASSIGN_OR_RETURN(lhs, expr) \
  FERRY_ASSIGN_OR_RETURN_IMPL_(FERRY_CONCAT_(ferry_result_, __LINE__), lhs, expr)
#define FERRY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
