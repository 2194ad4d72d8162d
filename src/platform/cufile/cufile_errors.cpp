#include "platform/cufile/cufile_errors.hpp"

#include <cstdlib>

namespace ferry::detail {

namespace {

struct ErrorText {
  int code;
  const char* name;
  const char* meaning;
};

// A row: the code, its enumerator's name as cufile.h spells it, and what it means.
#define FERRY_CUFILE_ERROR_(code, meaning) ErrorText{code, #code, meaning}

// Meanings are written from cuFile's documentation and from what the failures turn out to be in practice.
constexpr ErrorText kErrors[] = {
    FERRY_CUFILE_ERROR_(CU_FILE_SUCCESS, "success"),
    FERRY_CUFILE_ERROR_(CU_FILE_DRIVER_NOT_INITIALIZED,
                        "the nvidia-fs kernel driver is not loaded or cuFile's driver is not open; only cuFile's "
                        "compatibility (POSIX) path could be used"),
    FERRY_CUFILE_ERROR_(CU_FILE_DRIVER_INVALID_PROPS,
                        "cuFile rejected a driver property (check /etc/cufile.json or CUFILE_ENV_PATH_JSON)"),
    FERRY_CUFILE_ERROR_(CU_FILE_DRIVER_UNSUPPORTED_LIMIT, "a driver property is outside the range cuFile supports"),
    FERRY_CUFILE_ERROR_(CU_FILE_DRIVER_VERSION_MISMATCH,
                        "the nvidia-fs kernel module and libcufile are of incompatible versions"),
    FERRY_CUFILE_ERROR_(CU_FILE_DRIVER_VERSION_READ_ERROR,
                        "cuFile could not read the nvidia-fs driver version (/proc/driver/nvidia-fs)"),
    FERRY_CUFILE_ERROR_(CU_FILE_DRIVER_CLOSING, "the cuFile driver is shutting down"),
    FERRY_CUFILE_ERROR_(CU_FILE_PLATFORM_NOT_SUPPORTED,
                        "GPUDirect Storage is not supported on this platform (kernel, distribution or virtualisation)"),
    FERRY_CUFILE_ERROR_(CU_FILE_IO_NOT_SUPPORTED,
                        "GPUDirect Storage is not supported for this file: its file system or block device is not "
                        "one cuFile can drive directly"),
    FERRY_CUFILE_ERROR_(CU_FILE_DEVICE_NOT_SUPPORTED, "GPUDirect Storage is not supported on this GPU"),
    FERRY_CUFILE_ERROR_(CU_FILE_NVFS_DRIVER_ERROR, "an ioctl to the nvidia-fs kernel driver failed"),
    FERRY_CUFILE_ERROR_(CU_FILE_CUDA_DRIVER_ERROR,
                        "a CUDA driver call inside cuFile failed (the CUDA error is given alongside)"),
    FERRY_CUFILE_ERROR_(CU_FILE_CUDA_POINTER_INVALID, "the buffer is not a valid CUDA device pointer"),
    FERRY_CUFILE_ERROR_(CU_FILE_CUDA_MEMORY_TYPE_INVALID, "the buffer's memory type is not one cuFile accepts"),
    FERRY_CUFILE_ERROR_(CU_FILE_CUDA_POINTER_RANGE_ERROR, "the transfer runs past the end of the buffer's allocation"),
    FERRY_CUFILE_ERROR_(CU_FILE_CUDA_CONTEXT_MISMATCH,
                        "the buffer belongs to a different CUDA context than the one current on this thread"),
    FERRY_CUFILE_ERROR_(CU_FILE_INVALID_MAPPING_SIZE, "the buffer is larger than cuFile's maximum pinned memory size"),
    FERRY_CUFILE_ERROR_(CU_FILE_INVALID_MAPPING_RANGE, "the access is beyond the mapped buffer"),
    FERRY_CUFILE_ERROR_(CU_FILE_INVALID_FILE_TYPE,
                        "the file type is not supported (not a regular file or block device)"),
    FERRY_CUFILE_ERROR_(CU_FILE_INVALID_FILE_OPEN_FLAG, "the file was opened with flags cuFile does not support"),
    FERRY_CUFILE_ERROR_(CU_FILE_DIO_NOT_SET, "the file descriptor was not opened with O_DIRECT"),
    FERRY_CUFILE_ERROR_(CU_FILE_INVALID_VALUE, "an argument passed to cuFile is invalid"),
    FERRY_CUFILE_ERROR_(CU_FILE_MEMORY_ALREADY_REGISTERED, "the buffer is already registered"),
    FERRY_CUFILE_ERROR_(CU_FILE_MEMORY_NOT_REGISTERED,
                        "the buffer is not registered (lookup of the device pointer failed)"),
    FERRY_CUFILE_ERROR_(CU_FILE_PERMISSION_DENIED,
                        "permission denied opening the nvidia-fs driver or accessing the file"),
    FERRY_CUFILE_ERROR_(CU_FILE_DRIVER_ALREADY_OPEN, "the cuFile driver is already open"),
    FERRY_CUFILE_ERROR_(CU_FILE_HANDLE_NOT_REGISTERED,
                        "cuFile would not register this file: it could not confirm the file's block device and file "
                        "system support GPUDirect Storage. Usually the device has no udev record (\"udev property "
                        "not found: ID_FS_USAGE\" in the cuFile log; common in VMs and containers without "
                        "/run/udev), or the file system or mount options (ext4 needs data=ordered) are not supported"),
    FERRY_CUFILE_ERROR_(CU_FILE_HANDLE_ALREADY_REGISTERED, "this file descriptor is already registered with cuFile"),
    FERRY_CUFILE_ERROR_(CU_FILE_DEVICE_NOT_FOUND, "cuFile found no GPU to use"),
    FERRY_CUFILE_ERROR_(CU_FILE_INTERNAL_ERROR, "cuFile hit an internal error; its log has the details"),
    FERRY_CUFILE_ERROR_(CU_FILE_GETNEWFD_FAILED, "cuFile could not obtain a new file descriptor"),
    FERRY_CUFILE_ERROR_(CU_FILE_NVFS_SETUP_ERROR, "initialising the nvidia-fs driver failed"),
    FERRY_CUFILE_ERROR_(CU_FILE_IO_DISABLED,
                        "GPUDirect Storage is disabled for this file by cuFile's configuration (cufile.json)"),
    FERRY_CUFILE_ERROR_(CU_FILE_BATCH_SUBMIT_FAILED, "submitting a batch of I/O failed"),
    FERRY_CUFILE_ERROR_(CU_FILE_GPU_MEMORY_PINNING_FAILED,
                        "cuFile could not pin GPU memory (BAR1 space exhausted or unsupported)"),
    FERRY_CUFILE_ERROR_(CU_FILE_BATCH_FULL, "the batch queue is full"),
    FERRY_CUFILE_ERROR_(CU_FILE_ASYNC_NOT_SUPPORTED, "cuFile's stream operations are not supported"),
    FERRY_CUFILE_ERROR_(CU_FILE_INTERNAL_BATCH_SETUP_ERROR, "internal error setting up a batch; retry later"),
    FERRY_CUFILE_ERROR_(CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR, "internal error submitting a batch; retry later"),
    FERRY_CUFILE_ERROR_(CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR, "internal error reading batch status; retry later"),
    FERRY_CUFILE_ERROR_(CU_FILE_INTERNAL_BATCH_CANCEL_ERROR, "internal error cancelling a batch; retry later"),
    FERRY_CUFILE_ERROR_(CU_FILE_NOMEM_ERROR, "cuFile ran out of memory; retry later"),
    FERRY_CUFILE_ERROR_(CU_FILE_IO_ERROR, "cuFile reported an I/O error"),
    FERRY_CUFILE_ERROR_(CU_FILE_INTERNAL_BUF_REGISTER_ERROR, "cuFile could not register an internal buffer"),
    FERRY_CUFILE_ERROR_(CU_FILE_HASH_OPR_ERROR, "an internal hash table operation in cuFile failed"),
    FERRY_CUFILE_ERROR_(CU_FILE_INVALID_CONTEXT_ERROR, "no valid CUDA context is current on the calling thread"),
    FERRY_CUFILE_ERROR_(CU_FILE_NVFS_INTERNAL_DRIVER_ERROR, "the nvidia-fs kernel driver reported an internal error"),
    FERRY_CUFILE_ERROR_(CU_FILE_BATCH_NOCOMPAT_ERROR,
                        "compatibility mode is off, and this batch operation would need it"),
};
#undef FERRY_CUFILE_ERROR_

const ErrorText* find(int code) noexcept {
  if (code < 0) code = -code;
  for (const ErrorText& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

}  // namespace

const char* cufile_error_name(int code) noexcept {
  const ErrorText* e = find(code);
  return e ? e->name : "unknown cuFile error";
}

const char* cufile_error_meaning(int code) noexcept {
  const ErrorText* e = find(code);
  return e ? e->meaning : "an error code this version of Ferry does not know; see cuFile's log";
}

Status cufile_status(std::string_view what, int code, int cuda_code, std::string_view log_line,
                     const std::string& path, ErrorCode status_code) {
  int positive = code < 0 ? -code : code;
  std::string message = std::string(what) + " failed with cuFile error " + std::to_string(positive) + " (" +
                        cufile_error_name(positive) + "): " + cufile_error_meaning(positive);
  if (positive == CU_FILE_CUDA_DRIVER_ERROR && cuda_code != 0) message += "; CUDA error " + std::to_string(cuda_code);
  if (!log_line.empty()) {
    message += "; cuFile log: ";
    message += log_line;
  }
  return Status(status_code, std::move(message), 0, path);
}

}  // namespace ferry::detail
