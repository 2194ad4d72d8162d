// Pieces of a range taken in turn by a few threads: see cli/support/pieces.hpp.
#include "cli/support/pieces.hpp"

#include <algorithm>
#include <atomic>
#include <thread>

namespace ferry::cli {

Status for_each_piece(std::uint64_t total, std::uint64_t piece, unsigned threads, const PieceFn& fn) {
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> failed{false};
  Status first_error;  // written only by the thread that sets `failed`, read after every join
  auto worker = [&] {
    std::vector<std::uint8_t> buffer;
    for (std::uint64_t at = next.fetch_add(piece); at < total && !failed; at = next.fetch_add(piece)) {
      Status s = fn(at, std::min(piece, total - at), buffer);
      if (!s.ok()) {
        if (!failed.exchange(true)) first_error = std::move(s);
        return;
      }
    }
  };
  // Small ranges (`ferry load --verify` checks each tensor apart) must not each cost threads and buffers.
  const std::uint64_t pieces = (total + piece - 1) / piece;
  const std::uint64_t workers = std::min<std::uint64_t>(std::max(1u, threads), pieces);
  if (workers <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (std::uint64_t i = 0; i < workers; ++i) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  }
  return first_error;
}

}  // namespace ferry::cli
