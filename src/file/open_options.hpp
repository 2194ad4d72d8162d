// Internal ways into File::open: tests hand in scripted system calls and fake GPU platforms here.
#pragma once

#include <string>
#include <string_view>

#include "ferry/file.hpp"
#include "io/syscalls.hpp"

namespace ferry::detail {

struct GpuPlatform;  // src/route/gpu_platform.hpp: the loaded CUDA and cuFile tables, or fakes

struct OpenOptions {
  Syscalls* syscalls = &real_syscalls();
  // nullptr: the process's real platform (CUDA and cuFile loaded on first use).
  const GpuPlatform* gpu = nullptr;
};

[[nodiscard]] Result<File> open_file(const std::string& path, std::string_view mode, const Config& config,
                                     const OpenOptions& options);

}  // namespace ferry::detail
