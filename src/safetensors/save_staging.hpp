// Staging memory for a save: windows of kSaveWindowBytes that hold a stretch of the file image each, and the
// copy streams that fill them from GPU memory.
//
// Where some tensor is in GPU memory the windows are pinned: kits of the process's StagingPool (portable,
// huge-page backed, kept for the process and handed out again, as the staged route's bounce buffers are),
// of at most kWindowsPerKit windows each, so that saves of any size reuse what earlier saves pinned. Otherwise
// they are page-aligned host memory of the save's own, and CUDA is never touched.
// Thread safety: one SaveStaging per save, used by the thread running it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backends/staging_pool.hpp"
#include "base/host_memory.hpp"
#include "ferry/status.hpp"
#include "platform/cuda/cuda_api.hpp"

namespace ferry::safetensors::detail {

inline constexpr unsigned kWindowsPerKit = 8;

class SaveStaging {
 public:
  /// `windows` windows; pinned for `device` (the GPU whose context and stream the first kit uses) when
  /// `api` is given (waiting for room in the pinned budget: staging_windows() sizes them to fit), else host
  /// memory. Errors: the driver's (pinned memory exhausted), no_space for host memory.
  [[nodiscard]] static Result<SaveStaging> make(const ferry::detail::CudaApi* api, int device, std::size_t windows);
  SaveStaging(SaveStaging&& o) noexcept;
  SaveStaging& operator=(SaveStaging&&) = delete;
  ~SaveStaging();

  std::size_t windows() const { return windows_.size(); }
  char* window(std::size_t i) const { return windows_[i]; }
  bool pinned() const { return api_ != nullptr; }
  std::uint64_t bytes() const;
  /// How long make() waited for room in the pinned budget.
  std::uint64_t pinned_wait_ns() const { return pinned_wait_ns_; }

  /// A stream for copies from `device`'s memory (the device's primary context must be current): a kit's
  /// own stream for the staging device, one made for the save otherwise (destroyed with it).
  [[nodiscard]] Result<ferry::detail::CUstream> stream_for(int device);

 private:
  SaveStaging() = default;
  const ferry::detail::CudaApi* api_ = nullptr;
  int device_ = -1;
  std::vector<std::unique_ptr<ferry::detail::StagingKit>> kits_;
  std::optional<ferry::detail::HostMemory> host_;
  std::vector<char*> windows_;
  std::map<int, ferry::detail::CUstream> own_streams_;  // devices other than device_
  std::uint64_t pinned_wait_ns_ = 0;
};

}  // namespace ferry::safetensors::detail
