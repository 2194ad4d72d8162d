// The fields of ferry::CuFileCounters as a list, for code that walks them all.
#pragma once

#include "ferry/route.hpp"

namespace ferry::detail {

/// Every field of CuFileCounters with its name in JSON: the one list that sums, differences and printing
/// walk, so that a field added to the struct is added here and nowhere else.
struct CuFileCounterField {
  const char* name;
  std::uint64_t CuFileCounters::*member;
};
inline constexpr CuFileCounterField kCuFileCounterFields[] = {
    {"nvfs_reads", &CuFileCounters::nvfs_reads},   {"posix_reads", &CuFileCounters::posix_reads},
    {"p2p_reads", &CuFileCounters::p2p_reads},     {"nvfs_writes", &CuFileCounters::nvfs_writes},
    {"posix_writes", &CuFileCounters::posix_writes}, {"p2p_writes", &CuFileCounters::p2p_writes},
    {"read_bytes", &CuFileCounters::read_bytes},   {"write_bytes", &CuFileCounters::write_bytes},
    {"read_errors", &CuFileCounters::read_errors}, {"write_errors", &CuFileCounters::write_errors},
};

}  // namespace ferry::detail
