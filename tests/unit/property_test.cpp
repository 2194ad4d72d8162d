// A randomized property test of the engine against a model: random settings (task size, threads,
// O_DIRECT policy), random file sizes, and random sequences of pread, pwrite, read, write (at the file
// position), truncation and growth, with unaligned offsets and sizes crossing task boundaries and the end
// of the file. After every operation the count must match the model, the bytes read must match it, and
// no byte of the buffer past the count may change; at the end the file must equal the model.
// Bounded for CI; FERRY_PROPERTY_CASES runs more, FERRY_PROPERTY_SEED replays one (the seed of a failing
// case is printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "base/host_memory.hpp"
#include "ferry/ferry.hpp"
#include "support/test_files.hpp"

namespace ferry {
namespace {

constexpr std::uint8_t kSentinel = 0x6B;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Page-aligned host memory of `n` bytes, each kSentinel.
detail::HostMemory sentinel_buffer(std::uint64_t n) {
  detail::HostMemory m = detail::HostMemory::allocate(n).value();
  std::memset(m.data(), kSentinel, n);
  return m;
}

// One case; returns "" or what went wrong.
std::string run_case(std::uint64_t seed, const std::filesystem::path& dir) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::uint64_t n) { return n ? rng() % n : 0; };
  const std::uint64_t task_sizes[] = {4096, 8192, 12288, 65536};
  Config c;
  c.set_task_size(task_sizes[pick(4)]).set_threads(1 + static_cast<unsigned>(pick(6)));
  c.set_direct_io(static_cast<DirectIo>(pick(3)));
  auto path = dir / "p.bin";
  std::vector<std::uint8_t> model = testing::pattern(0, pick(300 << 10));
  testing::write_pattern_file(path, model.size());
  auto file = File::open(path.string(), "r+", c);
  if (!file.ok()) return file.status().to_string();
  std::uint64_t position = 0;
  const int ops = 25;
  for (int op = 0; op < ops; ++op) {
    const std::uint64_t kind = pick(10);
    const std::uint64_t offset = pick(model.size() + (20 << 10) + 1);
    const std::uint64_t size = pick(4) == 0 ? pick(16) : pick(120 << 10);
    std::string what = fmt::format("seed {}, op {} (kind {}, offset {}, size {}, file {}, task {}, threads {}, direct {})",
                                   seed, op, kind, offset, size, model.size(), c.task_size(), c.threads(),
                                   direct_io_name(c.direct_io()));
    if (kind < 4 || kind == 8) {  // pread, or read() at the position
      const bool at_position = kind == 8;
      const std::uint64_t from = at_position ? position : offset;
      const std::uint64_t pad = pick(64);
      detail::HostMemory buf = sentinel_buffer(pad + size + 4096);
      Result<Transfer> r = at_position ? file->read(buf.data() + pad, size)
                                       : file->pread(buf.data() + pad, size, from).get();
      if (!r.ok()) return what + ": " + r.status().to_string();
      const std::uint64_t want = from >= model.size() ? 0 : std::min(size, model.size() - from);
      if (r->bytes != want) return what + fmt::format(": read {} bytes, expected {}", r->bytes, want);
      for (std::uint64_t i = 0; i < buf.size_bytes(); ++i) {
        std::uint8_t expect = kSentinel;
        if (i >= pad && i < pad + want) expect = model[from + i - pad];
        if (buf.data()[i] != expect) return what + fmt::format(": buffer byte {} is wrong", static_cast<std::int64_t>(i - pad));
      }
      if (at_position) position += want;
    } else if (kind < 7 || kind == 9) {  // pwrite, or write() at the position
      const bool at_position = kind == 9;
      const std::uint64_t to = at_position ? position : offset;
      detail::HostMemory buf = sentinel_buffer(size + 1);
      for (std::uint64_t i = 0; i < size; ++i) buf.data()[i] = static_cast<std::uint8_t>(rng());
      std::vector<std::uint8_t> data(buf.data(), buf.data() + size);
      Result<Transfer> r = at_position ? file->write(buf.data(), size) : file->pwrite(buf.data(), size, to).get();
      if (!r.ok()) return what + ": " + r.status().to_string();
      if (r->bytes != size) return what + fmt::format(": wrote {} bytes", r->bytes);
      if (size > 0) {
        if (model.size() < to + size) model.resize(to + size, 0);  // a hole reads as zeros
        std::copy(data.begin(), data.end(), model.begin() + static_cast<std::ptrdiff_t>(to));
      }
      if (at_position) position += size;
    } else {  // truncate or extend from outside Ferry
      std::uint64_t new_size = pick(model.size() + (40 << 10) + 1);
      std::filesystem::resize_file(path, new_size);
      model.resize(new_size, 0);
    }
    auto size_now = file->size();
    if (!size_now.ok() || *size_now != model.size()) return what + ": the file's size differs from the model";
  }
  if (!file->close().ok()) return "close failed";
  if (testing::read_whole_file(path) != model) return fmt::format("seed {}: the file differs from the model", seed);
  return {};
}

TEST(Property, RandomOperationSequencesMatchTheModel) {
  auto dir = testing::test_dir();
  const std::uint64_t first = env_or("FERRY_PROPERTY_SEED", 1);
  const std::uint64_t cases = std::getenv("FERRY_PROPERTY_SEED") ? 1 : env_or("FERRY_PROPERTY_CASES", 400);
  std::uint64_t passed = 0;
  for (std::uint64_t seed = first; seed < first + cases; ++seed) {
    std::string failure = run_case(seed, dir);
    ASSERT_TRUE(failure.empty()) << failure << " (replay: FERRY_PROPERTY_SEED=" << seed << ")";
    ++passed;
  }
  std::cout << "property: " << passed << " cases of 25 operations passed, seeds " << first << ".." << first + cases - 1
            << "\n";
}

}  // namespace
}  // namespace ferry
