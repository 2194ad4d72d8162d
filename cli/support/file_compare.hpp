// cli/support/file_compare.hpp: bytes in memory against the file itself, read with plain preads on a
// descriptor of its own and nothing of Ferry's engine, for `ferry read --verify`, `ferry load --verify` and
// `ferry-bench --verify`. A URL has no descriptor: it is read back with one range request at a time (one
// connection, the FERRY_REMOTE_* and FERRY_S3_* settings), so the parallel read's assembly is what is checked.
// Part of cli/support (its CMakeLists.txt says who links it).
#pragma once

#include <cstdint>
#include <string>

namespace ferry::cli {

struct VerifyOutcome {
  bool ok = true;
  std::string detail;            // "N bytes match ...", where and how they differ, or why nothing was compared
  bool reference_failed = false;  // the reading back failed: nothing was compared (detail says why)
};

/// Compares [offset, offset + size) of the file at `path` with `got` (or, when `got` is null, with
/// fill_generated's data for those offsets), with `threads` threads of 16 MiB preads (1: sequential).
/// ok=false names the first differing offset found.
VerifyOutcome compare_with_file(const std::string& path, const std::uint8_t* got, std::uint64_t offset,
                                std::uint64_t size, unsigned threads);

}  // namespace ferry::cli
