// The environment, table and JSON of `ferry-bench`.
#include "bench_report.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "base/timing.hpp"
#include "cli/support/json_text.hpp"
#include "platform/cuda/cuda_api.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/cufile/cufile_api.hpp"

namespace ferry::cli::bench {

std::string short_size(std::uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return fmt::format("{}GiB", bytes >> 30);
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return fmt::format("{}MiB", bytes >> 20);
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0) return fmt::format("{}KiB", bytes >> 10);
  return fmt::format("{}B", bytes);
}

namespace {

using detail::gib_per_s;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "";
}

// The file system holding `path`: the mountinfo line whose device number is the file's.
void file_system_of(const std::string& path, Environment& env) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return;
  std::string dev = fmt::format("{}:{}", major(st.st_dev), minor(st.st_dev));
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno;
    fields >> id >> parent >> devno;
    if (devno != dev) continue;
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream rest(line.substr(dash + 3));
    rest >> env.file_system >> env.device_source;
    return;
  }
}

std::string iso_time_utc() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string ratio_text(const Measurement& m, const char* key) {
  auto it = m.ratios.find(key);
  if (it == m.ratios.end()) return "-";
  return it->second >= 10 ? fmt::format("{:.1f}x", it->second) : fmt::format("{:.2f}x", it->second);
}

const char* sync_text(SyncPolicy s) {
  return s == SyncPolicy::end ? "one fdatasync after all data, inside the timed region"
                              : "none (data may still be in the page cache when the clock stops)";
}

}  // namespace

Environment gather_environment(const Plan& plan) {
  Environment env;
  utsname u{};
  if (::uname(&u) == 0) {
    env.kernel = fmt::format("{} {}", u.sysname, u.release);
    env.machine = u.machine;
  }
  env.cpus = static_cast<unsigned>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  env.cpu_model = cpu_model();
  env.memory_bytes = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  file_system_of(plan.path, env);
  env.time_utc = iso_time_utc();
  env.root = ::geteuid() == 0;
  env.ferry_version = FERRY_VERSION_TEXT;
#ifdef NDEBUG
  env.ndebug = true;
#endif
#ifdef __OPTIMIZE__
  env.optimized = true;
#endif
  env.default_threads = plan.base_config.threads();
  env.default_task_size = plan.base_config.task_size();

  const detail::CudaApi* api = detail::process_cuda_api();
  if (api == nullptr) {
    env.cuda_status = detail::process_cuda_status().message();
  } else {
    env.cuda_status = "ok";
    (void)api->cuDriverGetVersion(&env.driver_version);
    auto d = detail::describe_device(*api, plan.device);
    if (d.ok()) {
      env.gpu_name = d->name;
    } else {
      env.cuda_status = d.status().to_string();
    }
  }
  const detail::CuFileApi* cufile = detail::process_cufile_api();
  if (cufile == nullptr) {
    env.cufile_status = detail::process_cufile_status().message();
  } else if (cufile->cuFileGetVersion == nullptr) {
    env.cufile_status = "loaded, but this libcufile has no cuFileGetVersion";
  } else {
    auto e = cufile->cuFileGetVersion(&env.cufile_version);
    env.cufile_status = e.err == 0 ? "ok" : fmt::format("cuFileGetVersion failed with {}", static_cast<int>(e.err));
  }
  return env;
}

std::vector<std::string> environment_warnings(const Environment& env) {
  std::vector<std::string> w;
  if (!env.optimized || !env.ndebug)
    w.push_back(fmt::format("this ferry was built {} optimisation{}: numbers understate Ferry",
                            env.optimized ? "with" : "WITHOUT", env.ndebug ? "" : " and with assertions (no NDEBUG)"));
  if (env.file_system == "tmpfs" || env.file_system == "ramfs")
    w.push_back(fmt::format("the file is on {}: there is no disk, O_DIRECT is refused and 'cold' means nothing",
                            env.file_system));
  return w;
}

std::string render_table(const Outcome& o) {
  const Plan& p = o.plan;
  const Environment& e = o.env;
  const bool read = p.op == Op::read;
  std::string s;
  s += fmt::format("ferry-bench: {} {} of \"{}\"{}, {}, {} ({})\n", read ? "read" : "write", format_size(p.size), p.path,
                   o.file_created ? " (created with generated data)" : "",
                   p.pattern == Pattern::seq ? "sequential" : "random order, one request per task",
                   e.gpu_name.empty() ? "no GPU" : fmt::format("GPU {} {}", p.device, e.gpu_name),
                   e.file_system.empty() ? "file system unknown" : e.file_system + " on " + e.device_source);
  s += fmt::format("environment: {} {}, {} CPUs ({}), {} RAM; CUDA driver {}; cuFile {}; ferry {} ({}){}\n", e.kernel,
                   e.machine, e.cpus, e.cpu_model.empty() ? "?" : e.cpu_model, format_size(e.memory_bytes),
                   e.driver_version ? std::to_string(e.driver_version) : "none (" + e.cuda_status + ")",
                   e.cufile_version ? std::to_string(e.cufile_version) : "none (" + e.cufile_status + ")",
                   e.ferry_version, e.optimized && e.ndebug ? "optimised build" : "NOT an optimised build",
                   e.root ? ", root" : "");
  s += fmt::format("Ferry defaults: {} threads, {} tasks; repeats {} (cold {}); page-cache probe: {}\n",
                   e.default_threads, short_size(e.default_task_size), p.repeats, p.cold_repeats, o.cache_check);
  if (!read) s += fmt::format("sync policy: {}\n", sync_text(p.sync));
  for (const auto& w : o.warnings) s += "WARNING: " + w + "\n";
  s += "\n";

  s += fmt::format("{:<7} {:<4} {:<8} {:>3} {:>6} {:>8} {:>7} {:>7} {:>6} {:>9} {:>9}{} {:>7} {:>7} {:>7} {:>7}\n", "name",
                   "mem", "cond", "thr", "task", "GiB/s", "min", "max", "spread", "cpu s/GiB", "first run",
                   read ? "" : fmt::format(" {:>10}", "pre-sync"), "/copy", read ? "/pread" : "/pwrite", "/naive",
                   "/cufile");
  for (const auto& m : o.results) {
    std::string head = fmt::format("{:<7} {:<4} {:<8} {:>3} {:>6}", m.default_settings ? m.name + "*" : m.name, m.target, m.condition.empty() ? "-" : m.condition,
                                   m.threads ? std::to_string(m.threads) : "-",
                                   m.task_size ? short_size(m.task_size) : "-");
    if (m.status != "ok") {
      std::string why = m.reason.size() > 110 ? m.reason.substr(0, 107) + "..." : m.reason;
      s += fmt::format("{} {}: {}\n", head, m.status, why);
      continue;
    }
    std::string first = m.first_run ? fmt::format("{:.2f}", gib_per_s(m.first_run->bytes, m.first_run->seconds)) : "-";
    std::string presync = read ? "" : fmt::format(" {:>10}", m.gib_per_s_before_sync.count
                                                                 ? fmt::format("{:.2f}", m.gib_per_s_before_sync.median)
                                                                 : "-");
    s += fmt::format("{} {:>8.2f} {:>7.2f} {:>7.2f} {:>5.0f}% {:>9.3f} {:>9}{} {:>7} {:>7} {:>7} {:>7}{}\n", head,
                     m.gib_per_s.median, m.gib_per_s.min, m.gib_per_s.max, m.gib_per_s.spread_pct,
                     m.cpu_s_per_gib.median, first, presync, ratio_text(m, "copy"), ratio_text(m, "io"),
                     ratio_text(m, "naive"), ratio_text(m, "cufile"),
                     m.verify ? (m.verify->ok ? "  verified" : "  VERIFY FAILED") : "");
  }
  s += "\nGiB/s: median of the repeats (min, max, spread = (max-min)/median); first run: Ferry's cold-start run, not in\n"
       "the median; /x: median over the best median of x in the same condition (copy: pinned copy ceiling);\n"
       "*: Ferry's default threads and task size; cpu s/GiB: user+system CPU time of the process per GiB moved.\n";

  bool any_condition = false;
  for (const auto& m : o.results)
    if (!m.condition_detail.empty() && m.status == "ok") any_condition = true;
  if (any_condition) {
    s += "\nconditions (state before the last run):\n";
    for (const auto& m : o.results)
      if (!m.condition_detail.empty() && m.status == "ok")
        s += fmt::format("  {:<7} {:<5} {:>3}t: {}\n", m.name, m.condition, m.threads, m.condition_detail);
  }
  s += "\nroutes and notes:\n";
  for (const auto& m : o.results) {
    if (m.status == "skipped") continue;  // the table gave the reason
    std::string line = fmt::format("  {:<7} {:<8} {:>3}t {:>6}:", m.name, m.condition.empty() ? "-" : m.condition,
                                   m.threads, m.task_size ? short_size(m.task_size) : "-");
    std::vector<std::string> parts;
    if (m.status == "failed") parts.push_back("FAILED: " + m.reason);
    if (m.report) parts.push_back(m.report->summary());
    if (m.setup_seconds) parts.push_back(fmt::format("prepare() {:.3f} s: {}", *m.setup_seconds, m.setup_plan));
    for (const auto& n : m.notes) parts.push_back(n);
    if (m.verify && !m.verify->ok) parts.push_back("verify: " + m.verify->detail);
    for (std::size_t i = 0; i < parts.size(); ++i) line += (i == 0 ? " " : "; ") + parts[i];
    s += line + "\n";
  }
  if (!o.targets.empty()) {
    s += "\ntargets:\n";
    for (const auto& t : o.targets)
      s += fmt::format("  {} {}: {:.2f}x (want >= {:.2f}x) [{} vs {}]\n", t.pass ? "PASS" : "FAIL", t.name, t.measured,
                       t.want, t.result, t.reference);
  }
  for (const auto& n : o.notes) s += "note: " + n + "\n";
  s += fmt::format("total time {:.1f} s\n", o.total_seconds);
  return s;
}

nlohmann::json to_json(const Outcome& o) {
  using nlohmann::json;
  const Plan& p = o.plan;
  const Environment& e = o.env;
  json j;
  j["schema"] = "ferry.bench/1";
  j["command"] = "bench";
  j["environment"] = {
      {"time_utc", e.time_utc},
      {"kernel", e.kernel},
      {"machine", e.machine},
      {"cpus", e.cpus},
      {"cpu_model", e.cpu_model},
      {"memory_bytes", e.memory_bytes},
      {"file_system", e.file_system},
      {"file_system_source", e.device_source},
      {"root", e.root},
      {"gpu", e.gpu_name.empty() ? json(nullptr) : json(e.gpu_name)},
      {"cuda_driver_version", e.driver_version ? json(e.driver_version) : json(nullptr)},
      {"cuda_status", e.cuda_status},
      {"cufile_version", e.cufile_version ? json(e.cufile_version) : json(nullptr)},
      {"cufile_status", e.cufile_status},
      {"ferry_version", e.ferry_version},
      {"build", {{"optimized", e.optimized}, {"ndebug", e.ndebug}}},
      {"ferry_defaults", {{"threads", e.default_threads}, {"task_size", e.default_task_size}}},
  };
  json conditions = json::array();
  for (const auto& c : p.conditions) conditions.push_back(c);
  j["plan"] = {
      {"file", p.path},
      {"file_created", o.file_created},
      {"size_bytes", p.size},
      {"requested_size_bytes", p.requested_size},
      {"overwrite", p.overwrite},
      {"op", p.op == Op::read ? "read" : "write"},
      {"pattern", p.pattern == Pattern::seq ? "seq" : "random"},
      {"seed", p.seed},
      {"routes", p.routes},
      {"baselines", p.baselines},
      {"threads", p.threads},
      {"task_sizes", p.task_sizes},
      {"conditions", conditions},
      {"repeats", p.repeats},
      {"cold_repeats", p.cold_repeats},
      {"sync", p.op == Op::write ? json(p.sync == SyncPolicy::end ? "fdatasync_end" : "none") : json(nullptr)},
      {"sync_policy", p.op == Op::write ? json(sync_text(p.sync)) : json(nullptr)},
      {"verify", p.verify},
      {"device", p.device},
      {"page_cache_probe", o.cache_check},
  };
  auto summary = [](const Summary& s) -> json {
    if (s.count == 0) return nullptr;
    return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"spread_pct", s.spread_pct}, {"count", s.count}};
  };
  json results = json::array();
  for (const auto& m : o.results) {
    json r;
    r["name"] = m.name;
    r["kind"] = m.kind;
    r["memory"] = m.target;
    r["condition"] = m.condition.empty() ? json(nullptr) : json(m.condition);
    r["condition_detail"] = m.condition_detail;
    r["threads"] = m.threads ? json(m.threads) : json(nullptr);
    r["task_size"] = m.task_size ? json(m.task_size) : json(nullptr);
    r["bounce_buffer_size"] = m.bounce_buffer_size ? json(m.bounce_buffer_size) : json(nullptr);
    r["direct_io"] = m.direct_io.empty() ? json(nullptr) : json(m.direct_io);
    r["default_settings"] = m.default_settings;
    r["status"] = m.status;
    r["reason"] = m.reason;
    r["median_gib_per_s"] = m.status == "ok" ? json(m.gib_per_s.median) : json(nullptr);
    r["gib_per_s"] = summary(m.gib_per_s);
    r["gib_per_s_before_sync"] = summary(m.gib_per_s_before_sync);
    r["cpu_s_per_gib"] = m.status == "ok" ? json(m.cpu_s_per_gib.median) : json(nullptr);
    json runs = json::array();
    for (const auto& s : m.runs)
      runs.push_back({{"seconds", s.seconds}, {"sync_seconds", s.sync_seconds}, {"cpu_seconds", s.cpu_seconds},
                      {"bytes", s.bytes}, {"gib_per_s", gib_per_s(s.bytes, s.seconds)}});
    r["runs"] = runs;
    if (m.first_run) {
      r["first_run"] = {{"seconds", m.first_run->seconds},
                        {"gib_per_s", gib_per_s(m.first_run->bytes, m.first_run->seconds)},
                        {"cpu_seconds", m.first_run->cpu_seconds},
                        {"bytes", m.first_run->bytes},
                        {"route_summary", m.first_run_summary}};
    } else {
      r["first_run"] = nullptr;
    }
    r["setup_seconds"] = m.setup_seconds ? json(*m.setup_seconds) : json(nullptr);
    r["setup_route"] = m.setup_plan.empty() ? json(nullptr) : json(m.setup_plan);
    r["ratios"] = m.ratios;
    r["route_summary"] = m.report ? json(m.report->summary()) : json(nullptr);
    r["report"] = m.report ? report_json(*m.report) : json(nullptr);
    r["verify"] = m.verify ? json{{"ok", m.verify->ok}, {"detail", m.verify->detail}} : json(nullptr);
    r["notes"] = m.notes;
    results.push_back(std::move(r));
  }
  j["results"] = results;
  json targets = json::array();
  for (const auto& t : o.targets)
    targets.push_back({{"name", t.name}, {"result", t.result}, {"reference", t.reference}, {"want", t.want},
                       {"measured", t.measured}, {"pass", t.pass}});
  j["targets"] = targets;
  j["warnings"] = o.warnings;
  j["notes"] = o.notes;
  j["total_seconds"] = o.total_seconds;
  return j;
}

}  // namespace ferry::cli::bench
