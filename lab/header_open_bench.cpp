// header_open_bench: how long opening a safetensors checkpoint takes as its tensor count grows (issue 23:
// parsing was quadratic, 80,000 tensors took 79 s). A research tool, CPU only; its output goes into
// bench/results.
//
//   ferry_header_open_bench [DIR] [--tensors 1000,10000,100000] [--repeats 3]
//
// For each count, writes DIR/header-<count>.safetensors (F16 tensors of 2 elements named like a model's,
// "model.layers.<i>.weight"; DIR defaults to the current directory), then times parse_header on the header
// text alone and Checkpoint::open on the file (read, parse, validate, index), the best of the repeats, and
// prints one row per count with the time per tensor, so that linear growth shows as a flat column.
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ferry/safetensors.hpp"

namespace st = ferry::safetensors;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string header_json(std::size_t tensors) {
  std::string json = "{";
  for (std::size_t i = 0; i < tensors; ++i) {
    json += fmt::format(R"({}"model.layers.{}.weight":{{"dtype":"F16","shape":[2],"data_offsets":[{},{}]}})",
                        i ? "," : "", i, 4 * i, 4 * i + 4);
  }
  json += "}";
  json.append((8 - (8 + json.size()) % 8) % 8, ' ');
  return json;
}

void write_checkpoint(const std::string& path, const std::string& json, std::size_t tensors) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(json.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(prefix), 8);
  out.write(json.data(), static_cast<std::streamsize>(json.size()));
  std::string data(4 * tensors, '\0');
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::vector<std::size_t> parse_counts(const std::string& text) {
  std::vector<std::size_t> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(std::stoul(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = ".";
  std::vector<std::size_t> counts{1000, 10000, 100000};
  int repeats = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tensors" && i + 1 < argc) {
      counts = parse_counts(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (!a.empty() && a[0] != '-') {
      dir = a;
    } else {
      std::fprintf(stderr, "usage: %s [DIR] [--tensors 1000,10000,100000] [--repeats 3]\n", argv[0]);
      return 2;
    }
  }
  utsname u{};
  ::uname(&u);
  std::printf("header_open_bench: %s %s, %ld CPUs, best of %d\n", u.sysname, u.release, ::sysconf(_SC_NPROCESSORS_ONLN),
              repeats);
#if !defined(__OPTIMIZE__)
  std::printf("WARNING: this binary was built without optimisation; the times mean little\n");
#endif
  std::printf("%10s %14s %12s %12s %16s\n", "tensors", "header bytes", "parse s", "open s", "open us/tensor");
  std::fflush(stdout);
  for (std::size_t n : counts) {
    const std::string json = header_json(n);
    const std::string path = (std::filesystem::path(dir) / fmt::format("header-{}.safetensors", n)).string();
    write_checkpoint(path, json, n);
    double parse_best = 1e30, open_best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      double t0 = now_s();
      auto h = st::parse_header(json, json.size(), 4 * n, path);
      double t1 = now_s();
      auto c = st::Checkpoint::open(path);
      double t2 = now_s();
      if (!h.ok() || !c.ok()) {
        std::fprintf(stderr, "%s\n", (h.ok() ? c.status() : h.status()).to_string().c_str());
        return 1;
      }
      parse_best = std::min(parse_best, t1 - t0);
      open_best = std::min(open_best, t2 - t1);
    }
    std::printf("%10zu %14zu %12.3f %12.3f %16.2f\n", n, json.size(), parse_best, open_best,
                open_best / static_cast<double>(n) * 1e6);
    std::fflush(stdout);  // rows as they come: a quadratic parser takes minutes per row
    std::filesystem::remove(path);
  }
  return 0;
}
