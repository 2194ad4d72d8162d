// cli/support/pieces.hpp: a range cut into pieces that a few threads take in turn, for the tools' parallel
// work on plain memory and descriptors (generated data, warming the page cache, raw preads, --verify).
// Part of cli/support (its CMakeLists.txt says who links it).
// Thread safety: for_each_piece starts and joins its own threads; `fn` runs on several at once.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ferry/status.hpp"

namespace ferry::cli {

/// The piece the tools' untimed work is cut into.
inline constexpr std::uint64_t kPieceBytes = 16ull << 20;

/// What for_each_piece runs for each piece [at, at + length). `buffer` is the calling thread's own, empty at first
/// and kept from one of its pieces to the next.
using PieceFn = std::function<Status(std::uint64_t at, std::uint64_t length, std::vector<std::uint8_t>& buffer)>;

/// Runs `fn` for each piece of [0, total), `piece` (> 0) long (the last may be shorter), on up to `threads`
/// threads that each take the next piece in turn: at least one, at most one per piece, and none of its own when
/// one is enough. After a failure no thread starts another piece. Returns the first failure, else OK.
[[nodiscard]] Status for_each_piece(std::uint64_t total, std::uint64_t piece, unsigned threads, const PieceFn& fn);

}  // namespace ferry::cli
