// How much memory this process may use: the machine's physical memory, or less where a cgroup caps it (a
// container's memory limit). Defaults sized from memory (the pinned budget, a background save's staging) use
// it, so that a container is not told it has the host's memory.
// Thread safety: a pure function of the files it reads.
#pragma once

#include <cstdint>
#include <string>

namespace ferry::detail {

/// The smaller of physical memory and every memory limit of this process's cgroups (v2 `memory.max`, v1
/// `memory.limit_in_bytes`, at the mount's root and at the path /proc/self/cgroup names). Files are read under
/// `root` (tests give a folder laid out as /); a file that is missing or says "max" caps nothing.
std::uint64_t usable_memory_bytes(const std::string& root = "");

}  // namespace ferry::detail
