// Placing pinned bounce buffers on the NUMA node nearest the GPU, where the machine has several nodes:
// the copy engine then reads them without crossing the socket interconnect. One node: nothing to do.
#pragma once

#include <cstddef>
#include <string_view>

namespace ferry::detail {

/// Number of online NUMA nodes in a node list as sysfs writes it ("0", "0-1", "0-3,5"); 0 if unparsable.
int count_nodes(std::string_view node_list);

/// Online NUMA nodes of this machine (/sys/devices/system/node/online); 1 where sysfs does not say.
int online_numa_nodes();

/// The node bounce buffers for a GPU should live on: its nearest host node on a machine with several
/// nodes, else -1 (no placement).
int bounce_buffer_node(int gpu_host_numa_node, int online_nodes);

/// Prefers `node` for the pages of [addr, addr + bytes) not yet faulted in (mbind MPOL_PREFERRED).
/// Best effort: false when the kernel refuses.
bool prefer_node(void* addr, std::size_t bytes, int node);

}  // namespace ferry::detail
