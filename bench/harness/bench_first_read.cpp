// measure_first_read: fresh `ferry read` children, their JSON, and the medians of what they saw.
#include "bench_first_read.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/timing.hpp"

namespace ferry::cli::bench {
namespace {

using detail::now_ns;
using detail::seconds_since;

// The `ferry` in this program's own directory.
std::string ferry_beside_this_program() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string path = n > 0 ? std::string(self, static_cast<std::size_t>(n)) : std::string("./ferry-bench");
  return path.substr(0, path.rfind('/') + 1) + "ferry";
}

struct Child {
  int status = -1;
  std::string out;
  double wall_seconds = 0;
};

// Runs `program` with `args` (args[0] its name) with stdout captured (stderr goes where ours goes), and times
// it from fork to exit.
Child run_child(const std::string& program, const std::vector<std::string>& args) {
  Child c;
  int pipefd[2];
  if (::pipe(pipefd) != 0) return c;
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::uint64_t start = now_ns();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], STDOUT_FILENO);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n > 0) c.out.append(buf, static_cast<std::size_t>(n));
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  ::close(pipefd[0]);
  while (::waitpid(pid, &c.status, 0) < 0 && errno == EINTR) {
  }
  c.wall_seconds = seconds_since(start);
  return c;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

Measurement measure_first_read(const Plan& plan, const std::string& route) {
  Measurement m;
  m.name = route;
  m.kind = "ferry";
  m.target = route == "host" ? "host" : "gpu";
  m.condition = "first-read";
  m.condition_detail = "a fresh `ferry read` process per run, the file in the page cache";
  m.default_settings = true;
  std::vector<std::string> args = {"ferry", "read", plan.path, "--size", std::to_string(plan.size), "--json"};
  if (route != "host") {
    args.insert(args.end(), {"--device", std::to_string(plan.device), "--compat",
                             route == "staged" ? "on" : route == "cufile" ? "off" : "auto"});
  }
  std::vector<double> wall, setup, read;
  std::map<std::string, std::vector<double>> steps;
  const std::string ferry = ferry_beside_this_program();
  if (::access(ferry.c_str(), X_OK) != 0) {
    m.status = "failed";
    m.reason = fmt::format("no `ferry` beside ferry-bench to run: {}", ferry);
    return m;
  }
  for (unsigned i = 0; i < plan.repeats; ++i) {
    Child c = run_child(ferry, args);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(c.out);
    } catch (const nlohmann::json::exception&) {
    }
    if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0 || !j.is_object() || !j.contains("seconds")) {
      m.status = "failed";
      m.reason = fmt::format("`ferry read` exited {}: {}", WIFEXITED(c.status) ? WEXITSTATUS(c.status) : -1,
                             c.out.substr(0, 300));
      return m;
    }
    Sample s;
    s.seconds = j["setup_seconds"].get<double>() + j["seconds"].get<double>();
    s.bytes = j["bytes"].get<std::uint64_t>();
    m.runs.push_back(s);
    wall.push_back(c.wall_seconds);
    setup.push_back(j["setup_seconds"].get<double>());
    read.push_back(j["seconds"].get<double>());
    for (const auto& [name, step] : j["setup_costs"].items()) {
      if (step.is_object() && step["count"].get<std::uint64_t>() > 0) steps[name].push_back(step["seconds"].get<double>());
    }
    if (i + 1 == plan.repeats) m.first_run_summary = j["report"]["summary"].get<std::string>();
  }
  std::string breakdown;
  for (const auto& [name, v] : steps) breakdown += fmt::format("{}{} {:.1f} ms", breakdown.empty() ? "" : ", ", name, median(v) * 1e3);
  m.notes.push_back(fmt::format("medians of {} fresh processes: whole process {:.3f} s; prepare() {:.4f} s + read "
                                "{:.4f} s (the sample); one-time set-up: {}",
                                plan.repeats, median(wall), median(setup), median(read),
                                breakdown.empty() ? "none" : breakdown));
  return m;
}

}  // namespace ferry::cli::bench
