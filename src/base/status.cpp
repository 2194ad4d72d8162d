// Status: codes, errno mapping and message formatting.
#include "ferry/status.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace ferry {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::already_exists: return "already_exists";
    case ErrorCode::permission_denied: return "permission_denied";
    case ErrorCode::is_a_directory: return "is_a_directory";
    case ErrorCode::out_of_range: return "out_of_range";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::failed_precondition: return "failed_precondition";
    case ErrorCode::io_error: return "io_error";
    case ErrorCode::no_space: return "no_space";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::internal: return "internal";
  }
  return "unknown";
}

Status::Status(ErrorCode code, std::string message, int sys_errno, std::string path) {
  if (code == ErrorCode::ok) return;
  rep_ = std::make_shared<const Rep>(Rep{code, std::move(message), sys_errno, std::move(path)});
}

static ErrorCode code_for_errno(int e) {
  switch (e) {
    case ENOENT: case ENOTDIR: return ErrorCode::not_found;
    case EACCES: case EPERM: case EROFS: return ErrorCode::permission_denied;
    case EISDIR: return ErrorCode::is_a_directory;
    case EEXIST: return ErrorCode::already_exists;
    case ENOSPC: case EDQUOT: case EFBIG: return ErrorCode::no_space;
    case EINVAL: case EBADF: return ErrorCode::invalid_argument;
    case ENOMEM: case EAGAIN: case EBUSY: case ENODEV: case ENXIO: return ErrorCode::unavailable;
    case ECANCELED: return ErrorCode::cancelled;
    case EOVERFLOW: return ErrorCode::out_of_range;
    default: return ErrorCode::io_error;
  }
}

Status Status::from_errno(int sys_errno, std::string message, std::string path) {
  return Status(code_for_errno(sys_errno), std::move(message), sys_errno, std::move(path));
}

namespace {
const std::string kEmpty;  // constant-initialised: no first-use guard that a fork() could copy held
}  // namespace

const std::string& Status::message() const noexcept { return rep_ ? rep_->message : kEmpty; }

const std::string& Status::path() const noexcept { return rep_ ? rep_->path : kEmpty; }

std::string errno_name(int e) {
  // The common ones by hand, so that every C library gives the same names; glibc knows the rest.
  switch (e) {
#define FERRY_ERRNO_CASE(x) case x: return #x;
    FERRY_ERRNO_CASE(EPERM) FERRY_ERRNO_CASE(ENOENT) FERRY_ERRNO_CASE(ESRCH) FERRY_ERRNO_CASE(EINTR)
    FERRY_ERRNO_CASE(EIO) FERRY_ERRNO_CASE(ENXIO) FERRY_ERRNO_CASE(E2BIG) FERRY_ERRNO_CASE(ENOEXEC)
    FERRY_ERRNO_CASE(EBADF) FERRY_ERRNO_CASE(ECHILD) FERRY_ERRNO_CASE(EAGAIN) FERRY_ERRNO_CASE(ENOMEM)
    FERRY_ERRNO_CASE(EACCES) FERRY_ERRNO_CASE(EFAULT) FERRY_ERRNO_CASE(EBUSY) FERRY_ERRNO_CASE(EEXIST)
    FERRY_ERRNO_CASE(EXDEV) FERRY_ERRNO_CASE(ENODEV) FERRY_ERRNO_CASE(ENOTDIR) FERRY_ERRNO_CASE(EISDIR)
    FERRY_ERRNO_CASE(EINVAL) FERRY_ERRNO_CASE(ENFILE) FERRY_ERRNO_CASE(EMFILE) FERRY_ERRNO_CASE(ENOTTY)
    FERRY_ERRNO_CASE(ETXTBSY) FERRY_ERRNO_CASE(EFBIG) FERRY_ERRNO_CASE(ENOSPC) FERRY_ERRNO_CASE(ESPIPE)
    FERRY_ERRNO_CASE(EROFS) FERRY_ERRNO_CASE(EMLINK) FERRY_ERRNO_CASE(EPIPE) FERRY_ERRNO_CASE(ERANGE)
    FERRY_ERRNO_CASE(EDEADLK) FERRY_ERRNO_CASE(ENAMETOOLONG) FERRY_ERRNO_CASE(ENOLCK) FERRY_ERRNO_CASE(ENOSYS)
    FERRY_ERRNO_CASE(ENOTEMPTY) FERRY_ERRNO_CASE(ELOOP) FERRY_ERRNO_CASE(ENODATA) FERRY_ERRNO_CASE(ETIME)
    FERRY_ERRNO_CASE(EOVERFLOW) FERRY_ERRNO_CASE(EILSEQ) FERRY_ERRNO_CASE(ENOTSOCK)
    FERRY_ERRNO_CASE(EOPNOTSUPP) FERRY_ERRNO_CASE(EADDRINUSE) FERRY_ERRNO_CASE(ECONNRESET)
    FERRY_ERRNO_CASE(ENOBUFS) FERRY_ERRNO_CASE(ETIMEDOUT) FERRY_ERRNO_CASE(ECONNREFUSED)
    FERRY_ERRNO_CASE(EHOSTUNREACH) FERRY_ERRNO_CASE(EALREADY) FERRY_ERRNO_CASE(EINPROGRESS)
    FERRY_ERRNO_CASE(ESTALE) FERRY_ERRNO_CASE(EDQUOT) FERRY_ERRNO_CASE(ECANCELED) FERRY_ERRNO_CASE(EREMOTEIO)
    FERRY_ERRNO_CASE(ENOMEDIUM) FERRY_ERRNO_CASE(EKEYEXPIRED)
#undef FERRY_ERRNO_CASE
    default: break;
  }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* name = ::strerrorname_np(e)) return name;
#endif
  return fmt::format("errno {}", e);
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string out = fmt::format("{}: {}", error_code_name(rep_->code), rep_->message);
  if (rep_->sys_errno != 0) {
    out += fmt::format(": {} ({})", std::strerror(rep_->sys_errno), errno_name(rep_->sys_errno));
  }
  return out;
}

namespace detail {
void abort_with_status(const Status& s) {
  std::fprintf(stderr, "ferry: value() of a failed Result: %s\n", s.to_string().c_str());
  std::abort();
}
}  // namespace detail

}  // namespace ferry
