// The per-test leak check: see leak_check.hpp.
#include "support/leak_check.hpp"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "backends/staging_pool.hpp"
#include "ferry/config.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "support/fake_cuda.hpp"

namespace ferry::testing {
namespace {

// Descriptors a process keeps once they exist, by design: not leaks of the test that happened to make them.
bool kept_for_the_process(const std::string& target) {
  static constexpr std::string_view kKept[] = {
      "anon_inode:[io_uring]",  // the io_uring engine's ring, one per worker thread for the thread's life
  };
  for (std::string_view kept : kKept) {
    if (target == kept) return true;
  }
  // cuFile's log, open from the driver's opening (once per process, kept until exit) on.
  return std::string_view(target).ends_with("/cufile.log");
}

}  // namespace

void open_process_drivers(bool contexts) {
  const detail::CudaApi* api = detail::process_cuda_api();  // cuInit, where a driver is installed
  if (api == nullptr || !contexts) return;
  int count = 0;
  if (api->cuDeviceGetCount(&count) != detail::CUDA_SUCCESS) return;
  for (int device = 0; device < count; ++device) (void)detail::primary_context(*api, device);
}

std::map<int, std::string> open_descriptors() {
  std::map<int, std::string> out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == own) continue;
    char target[4096];
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    out[fd] = n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string("?");
  }
  ::closedir(dir);
  return out;
}

void LeakCheck::OnTestStart(const ::testing::TestInfo&) {
  descriptors_ = open_descriptors();
  fake_pinned_bytes_ = fake_cuda_pinned_bytes_not_freed();
}

void LeakCheck::OnTestEnd(const ::testing::TestInfo&) {
  for (const auto& [fd, target] : open_descriptors()) {
    auto before = descriptors_.find(fd);
    if ((before == descriptors_.end() || before->second != target) && !kept_for_the_process(target)) {
      ADD_FAILURE() << "leak check: file descriptor " << fd << " (" << target << ") was opened by this test and is "
                    << "still open";
    }
  }
  // Idle kits are the pool's cache, kept for the process on purpose; a kit still in use is a leak. A worker
  // of the engine gives its kit back once it finds nothing more to do, which may be a moment after the
  // request it last served was seen done: the check gives it a second.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    detail::process_staging_pool().clear();
    const bool freed = ferry::pinned_memory_use().pinned_bytes == 0 && fake_cuda_pinned_bytes_not_freed() <= fake_pinned_bytes_;
    if (freed || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (std::uint64_t pinned = ferry::pinned_memory_use().pinned_bytes; pinned != 0) {
    ADD_FAILURE() << "leak check: " << pinned << " bytes of staging kits are still pinned after the test (a kit "
                  << "was never given back)";
  }
  if (std::uint64_t now = fake_cuda_pinned_bytes_not_freed(); now > fake_pinned_bytes_) {
    ADD_FAILURE() << "leak check: " << now - fake_pinned_bytes_ << " bytes of host memory pinned or registered "
                  << "through the fake CUDA driver during this test were never freed";
  }
}

}  // namespace ferry::testing
