// ferry_soak: the stress run (tests/support/stress.hpp) for a long time on the real GPU(s), with the
// process's memory sampled as it goes: host RSS, pinned pages (VmPin, and the bytes Ferry's staging pool
// holds), and the GPU memory this process uses (nvidia-smi). One JSON line per sample on stdout, then a
// verdict line: every byte right, and memory flat (the last samples within a margin of those after
// the first minute, when the pools are warm).
//
//   ferry_soak --minutes 10 --dir DIR [--seed N] [--threads N] [--json-out FILE]
//
// Exit status: 0 all bytes right and memory flat; 1 otherwise.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/staging_pool.hpp"
#include "ferry/config.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "support/stress.hpp"

namespace {

struct Sample {
  double seconds = 0;
  std::uint64_t requests = 0, bytes = 0;
  std::uint64_t rss_kib = 0, pinned_kib = 0, staging_bytes = 0, gpu_mib = 0;
};

std::uint64_t status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::strtoull(line.c_str() + std::strlen(field), nullptr, 10);
  }
  return 0;
}

// GPU memory used by this process, summed over GPUs, as nvidia-smi reports it (0 when it cannot say).
std::uint64_t gpu_mib() {
  FILE* p = ::popen("nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null", "r");
  if (p == nullptr) return 0;
  std::uint64_t total = 0;
  char line[256];
  const long me = static_cast<long>(::getpid());
  while (std::fgets(line, sizeof line, p)) {
    long pid = 0;
    unsigned long mib = 0;
    if (std::sscanf(line, "%ld, %lu", &pid, &mib) == 2 && pid == me) total += mib;
  }
  ::pclose(p);
  return total;
}

nlohmann::json to_json(const Sample& s) {
  return {{"t", std::round(s.seconds * 10) / 10}, {"requests", s.requests}, {"bytes", s.bytes},
          {"rss_kib", s.rss_kib}, {"vmpin_kib", s.pinned_kib}, {"staging_pinned_bytes", s.staging_bytes},
          {"gpu_mib", s.gpu_mib}};
}

std::string json(const Sample& s) { return to_json(s).dump(); }

}  // namespace

int main(int argc, char** argv) {
  double minutes = 10;
  std::uint64_t seed = 1;
  unsigned threads = 16;
  std::string dir = ".", json_out;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--minutes") minutes = std::atof(argv[i + 1]);
    else if (a == "--dir") dir = argv[i + 1];
    else if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--threads") threads = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (a == "--json-out") json_out = argv[i + 1];
  }
  const ferry::detail::CudaApi* api = ferry::detail::process_cuda_api();
  if (api == nullptr) {
    std::cerr << "ferry_soak: no usable GPU: " << ferry::detail::process_cuda_status().to_string() << "\n";
    return 77;
  }
  int gpus = 0;
  api->cuDeviceGetCount(&gpus);
  ferry::testing::StressOptions o;
  o.seed = seed;
  o.threads = threads;
  o.files = 3;
  o.region_bytes = (4 << 20) + 4099;
  o.task_size = 512 << 10;
  o.ferry_threads = 8;
  o.max_requests = UINT64_MAX / 2;
  o.max_time = std::chrono::milliseconds(static_cast<std::int64_t>(minutes * 60000));
  o.devices.clear();
  for (int d = 0; d < gpus; ++d) o.devices.push_back(d);
  o.dir = dir;
  std::vector<Sample> samples;
  auto start = std::chrono::steady_clock::now();
  std::ofstream out_file;
  if (!json_out.empty()) out_file.open(json_out);
  auto take = [&](std::uint64_t requests, std::uint64_t bytes) {
    Sample s;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    s.requests = requests;
    s.bytes = bytes;
    s.rss_kib = status_kib("VmRSS:");
    s.pinned_kib = status_kib("VmPin:");
    s.staging_bytes = ferry::pinned_memory_use().pinned_bytes;
    s.gpu_mib = gpu_mib();
    samples.push_back(s);
    std::cout << json(s) << std::endl;
    if (out_file) out_file << json(s) << "\n" << std::flush;
  };
  std::uint64_t ticks = 0;
  o.on_tick = [&](std::uint64_t requests, std::uint64_t bytes) {
    if (ticks++ % 10 == 0) take(requests, bytes);  // every ten seconds
  };
  auto outcome = ferry::testing::run_stress(o);
  take(outcome.requests, outcome.bytes);
  // Flat: compare the last sample with the first one taken after a minute (warm pools), allowing a
  // small margin for the allocator.
  const Sample* warm = &samples.front();
  for (const Sample& s : samples) {
    if (s.seconds >= 60) {
      warm = &s;
      break;
    }
  }
  const Sample& last = samples.back();
  auto grew = [](std::uint64_t from, std::uint64_t to, std::uint64_t slack) { return to > from + slack; };
  const bool flat = !grew(warm->rss_kib, last.rss_kib, 64 << 10) && !grew(warm->pinned_kib, last.pinned_kib, 0) &&
                    !grew(warm->staging_bytes, last.staging_bytes, 0) && !grew(warm->gpu_mib, last.gpu_mib, 64);
  nlohmann::json v = {{"verdict", outcome.ok() && flat ? "pass" : "fail"},
                      {"gpus", gpus},
                      {"seed", seed},
                      {"minutes", outcome.seconds / 60},
                      {"requests", outcome.requests},
                      {"reads", outcome.reads},
                      {"writes", outcome.writes},
                      {"device_requests", outcome.device_requests},
                      {"bytes", outcome.bytes},
                      {"wrong_bytes", outcome.wrong_bytes},
                      {"errors", outcome.errors},
                      {"memory_flat", flat},
                      {"warm", to_json(*warm)},
                      {"last", to_json(last)},
                      {"summary", outcome.summary()}};
  std::string verdict = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::cout << verdict << std::endl;
  if (out_file) out_file << verdict << "\n";
  return outcome.ok() && flat ? 0 : 1;
}
