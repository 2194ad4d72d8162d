// compare_with_file: pieces of the file against memory, first difference wins.
#include "cli/support/file_compare.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "base/unique_fd.hpp"
#include "cli/support/generated_data.hpp"
#include "cli/support/pieces.hpp"
#include "ferry/file.hpp"
#include "ferry/remote.hpp"

namespace ferry::cli {
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
  detail::UniqueFd fd(remote_object ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!remote_object && !fd.valid()) {
    return {false, fmt::format("could not reopen \"{}\" for verification: {}", path, std::strerror(errno)), true};
  }
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
  // A failed read back ends the check: every piece not yet taken lies past the failure, so cannot hold the
  // first difference.
  const Status read_back_failed(ErrorCode::io_error, "the file could not be read back");
  // `buffer` holds the file's bytes, then (without `got`) the generated ones: room for both.
  auto compare = [&](std::uint64_t at, std::uint64_t want, std::vector<std::uint8_t>& buffer) {
    buffer.resize(got ? want : 2 * want);
    std::uint8_t* ref = buffer.data();
    std::uint64_t have = 0;
    int err = 0;
    if (object) {
      auto n = object->pread(ref, want, offset + at).get();
      if (!n.ok()) {
        report(at, fmt::format("could not read it back at offset {}: {}", offset + at, n.status().to_string()), true);
        return read_back_failed;
      }
      have = n->bytes;
    }
    while (!object && have < want) {
      ssize_t n = ::pread(fd.get(), ref + have, want - have, static_cast<off_t>(offset + at + have));
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
      return read_back_failed;
    }
    const std::uint8_t* cmp = got ? got + at : ref + want;
    if (!got) fill_generated(ref + want, want, offset + at);
    if (std::memcmp(ref, cmp, want) != 0) {
      std::uint64_t i = 0;
      while (ref[i] == cmp[i]) ++i;
      report(at + i, fmt::format("first difference at file offset {}: the file has 0x{:02x}, {} 0x{:02x}",
                                 offset + at + i, ref[i], got ? "memory has" : "the generated data has", cmp[i]));
    }
    return Status();
  };
  (void)for_each_piece(size, kPieceBytes, threads, compare);
  if (first_bad != UINT64_MAX) return {false, first_detail, reference_failed};
  return {true, fmt::format("{} bytes match {}", size,
                            !got ? "the generated data" : threads <= 1 ? "a sequential read" : "the file")};
}

}  // namespace ferry::cli
