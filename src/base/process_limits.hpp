// What of the machine this process may use: its memory and its cores, or less where a cgroup caps them (a
// container's limits) or the affinity mask narrows them (taskset, a CPU-pinned container). Defaults sized from
// them (the pinned budget, a background save's staging, the worker threads) use these, so that a container is
// not told it has the host's memory and cores.
// Thread safety: pure functions of the files they read (and the affinity mask), usable_cores() cached once.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::detail {

/// The smaller of physical memory and every memory limit of this process's cgroups (v2 `memory.max`, v1
/// `memory.limit_in_bytes`, at the mount's root and at the path /proc/self/cgroup names). Files are read under
/// `root` (tests give a folder laid out as /); a file that is missing or says "max" caps nothing.
std::uint64_t usable_memory_bytes(const std::string& root = "");

/// The cores of the affinity mask, fewer where a cgroup's CPU quota allows fewer (v2 `cpu.max`, v1
/// `cpu.cfs_quota_us` / `cpu.cfs_period_us`, where usable_memory_bytes() looks; a fraction counts as a core);
/// at least 1. Files are read under `root`.
unsigned usable_cores(const std::string& root);

/// usable_cores("") of this process, worked out once and kept: the engine asks it on worker threads, where opening a
/// file could show as a descriptor leak. The first caller is the default configuration, before any worker runs.
unsigned usable_cores();

}  // namespace ferry::detail
