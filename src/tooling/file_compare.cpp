// compare_with_file: pieces of the file against memory, first difference wins.
#include "ferry_tooling/file_compare.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "ferry/file.hpp"
#include "ferry/remote.hpp"
#include "ferry_tooling/generated_data.hpp"
#include "ferry_tooling/unique_fd.hpp"

namespace ferry::tooling {
namespace {

// The object once more, on one connection, with the settings of the environment (FERRY_REMOTE_*,
// FERRY_S3_*) as the read being checked had them.
Result<File> reference_object(const std::string& url) {
  FERRY_ASSIGN_OR_RETURN(Config config, default_config());
  RemoteSettings one = config.remote();
  one.connections = 1;
  config.set_remote(one);
  return File::open(url, "r", config);
}

}  // namespace

VerifyOutcome compare_with_file(const std::string& path, const std::uint8_t* got, std::uint64_t offset,
                                std::uint64_t size, unsigned threads) {
  const bool remote_object = remote::is_remote_url(path);
  std::optional<File> object;
  if (remote_object) {
    auto opened = reference_object(path);
    if (!opened.ok()) return {false, "could not read it back: " + opened.status().to_string(), true};
    object.emplace(std::move(*opened));
    threads = 1;
  }
  UniqueFd fd(remote_object ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!remote_object && !fd.valid()) {
    return {false, fmt::format("could not reopen \"{}\" for verification: {}", path, std::strerror(errno)), true};
  }
  constexpr std::uint64_t kPiece = 16ull << 20;
  std::atomic<std::uint64_t> next{0};
  std::mutex mutex;
  std::uint64_t first_bad = UINT64_MAX;
  std::string first_detail;
  bool reference_failed = false;
  auto report = [&](std::uint64_t at, std::string detail, bool failed = false) {
    std::lock_guard<std::mutex> lock(mutex);
    if (at < first_bad) {
      first_bad = at;
      first_detail = std::move(detail);
      reference_failed = failed;
    }
  };
  // Buffers and threads only as many as the range needs: `ferry load --verify` compares each tensor apart,
  // and thousands of small tensors must not each cost 16 MiB buffers per thread.
  const std::uint64_t pieces = (size + kPiece - 1) / kPiece;
  const std::uint64_t buffer = std::min(kPiece, size);
  auto worker = [&] {
    std::vector<std::uint8_t> ref(buffer), expect(got ? 0 : buffer);
    for (std::uint64_t at = next.fetch_add(kPiece); at < size; at = next.fetch_add(kPiece)) {
      std::uint64_t want = std::min(kPiece, size - at);
      std::uint64_t have = 0;
      int err = 0;
      if (object) {
        auto n = object->pread(ref.data(), want, offset + at).get();
        if (!n.ok()) {
          report(at, fmt::format("could not read it back at offset {}: {}", offset + at, n.status().to_string()), true);
          return;
        }
        have = n->bytes;
      }
      while (!object && have < want) {
        ssize_t n = ::pread(fd.get(), ref.data() + have, want - have, static_cast<off_t>(offset + at + have));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          err = n < 0 ? errno : 0;
          break;
        }
        have += static_cast<std::uint64_t>(n);
      }
      if (have < want) {
        report(at + have, fmt::format("the plain read stopped at file offset {} ({})", offset + at + have,
                                      err ? std::strerror(err) : "end of file"), err != 0);
        return;
      }
      const std::uint8_t* cmp = got ? got + at : expect.data();
      if (!got) fill_generated(expect.data(), want, offset + at);
      if (std::memcmp(ref.data(), cmp, want) != 0) {
        std::uint64_t i = 0;
        while (ref[i] == cmp[i]) ++i;
        report(at + i, fmt::format("first difference at file offset {}: the file has 0x{:02x}, {} 0x{:02x}",
                                   offset + at + i, ref[i], got ? "memory has" : "the generated data has", cmp[i]));
      }
    }
  };
  const std::uint64_t workers = std::min<std::uint64_t>(std::max(1u, threads), pieces);
  if (workers == 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (std::uint64_t i = 0; i < workers; ++i) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  }
  if (first_bad != UINT64_MAX) return {false, first_detail, reference_failed};
  return {true, fmt::format("{} bytes match {}", size,
                            !got ? "the generated data" : threads <= 1 ? "a sequential read" : "the file")};
}

}  // namespace ferry::tooling
