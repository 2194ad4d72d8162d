// NUMA placement without libnuma: the node list from sysfs, mbind through syscall().
#include "platform/numa_placement.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <string>

namespace ferry::detail {
namespace {

constexpr int kMpolPreferred = 1;  // include/uapi/linux/mempolicy.h

bool parse_int(std::string_view s, int* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && *out >= 0;
}

}  // namespace

int count_nodes(std::string_view list) {
  while (!list.empty() && (list.back() == '\n' || list.back() == ' ')) list.remove_suffix(1);
  int count = 0;
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    std::string_view part = list.substr(0, comma);
    std::size_t dash = part.find('-');
    int lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!parse_int(part, &lo)) return 0;
      hi = lo;
    } else if (!parse_int(part.substr(0, dash), &lo) || !parse_int(part.substr(dash + 1), &hi) || hi < lo) {
      return 0;
    }
    count += hi - lo + 1;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return count;
}

int online_numa_nodes() {
  std::ifstream in("/sys/devices/system/node/online");
  std::string text;
  std::getline(in, text);
  int n = count_nodes(text);
  return n > 0 ? n : 1;
}

int bounce_buffer_node(int gpu_host_numa_node, int online_nodes) {
  return online_nodes > 1 && gpu_host_numa_node >= 0 ? gpu_host_numa_node : -1;
}

bool prefer_node(void* addr, std::size_t bytes, int node) {
  if (node < 0 || node >= 1024) return false;
  constexpr unsigned kBits = 8 * sizeof(unsigned long);
  unsigned long mask[1024 / kBits] = {};
  mask[static_cast<unsigned>(node) / kBits] |= 1ul << (static_cast<unsigned>(node) % kBits);
  return ::syscall(SYS_mbind, addr, bytes, kMpolPreferred, mask, 1024ul, 0u) == 0;
}

}  // namespace ferry::detail
