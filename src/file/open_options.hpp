// Internal ways into File::open: tests hand in scripted system calls, fake GPU platforms and sources of
// their own here.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ferry/file.hpp"
#include "source/syscalls.hpp"

namespace ferry::detail {

struct GpuPlatform;  // src/platform/gpu_platform.hpp: the loaded CUDA and cuFile tables, or fakes

struct OpenOptions {
  Syscalls* syscalls = &real_syscalls();
  // nullptr: the process's real platform (CUDA and cuFile loaded on first use).
  const GpuPlatform* gpu = nullptr;
  std::string name;  // the file's name in messages and reports, as FileDescriptors::open's; empty: the path
};

[[nodiscard]] Result<File> open_file(const std::string& path, std::string_view mode, const Config& config,
                                     const OpenOptions& options);

class Source;
/// A File over any source (an in-memory one in the tests, a remote object): every route but cuFile's
/// serves it unchanged. `mode` as for open_file ("r", "w", "r+", "a"); only its access part matters here,
/// the source decides what creating or truncating means. options.syscalls is not used.
[[nodiscard]] Result<File> open_source(std::shared_ptr<Source> source, std::string_view mode, const Config& config,
                                       const OpenOptions& options);

}  // namespace ferry::detail
