#include "remote/servers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#ifndef FERRY_SOURCE_DIR
#error "FERRY_SOURCE_DIR must name the source tree"
#endif

namespace ferry::testing {
namespace {

using Clock = std::chrono::steady_clock;

int connect_local(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::string ChildProcess::start(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid_ == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    if (log_fd >= 0) ::dup2(log_fd, 2);
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  if (log_fd >= 0) ::close(log_fd);
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  return {};
}

int ChildProcess::wait_for_port_line(int timeout_ms) {
  std::string got;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    pollfd p{stdout_fd_, POLLIN, 0};
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (::poll(&p, 1, std::max(1, left)) <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) return 0;
    got.append(buf, static_cast<size_t>(n));
    const auto at = got.find("port ");
    const auto nl = got.find('\n', at == std::string::npos ? 0 : at);
    if (at != std::string::npos && nl != std::string::npos) return std::atoi(got.c_str() + at + 5);
  }
  return 0;
}

void ChildProcess::stop() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  stdin_fd_ = stdout_fd_ = -1;
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string missing_program(const std::string& program, const std::string& package) {
  if (::access(program.c_str(), X_OK) == 0) return {};
  return program + " not found: install " + package + " (scripts/install-deps.sh does)";
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

bool wait_for_listen(int port, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    const int fd = connect_local(port);
    if (fd >= 0) {
      ::close(fd);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string NginxServer::start(const std::filesystem::path& root, const std::filesystem::path& work, int workers) {
  if (auto why = missing_program("/usr/sbin/nginx", "nginx"); !why.empty()) return why;
  std::filesystem::create_directories(work);
  std::string last_error;
  for (int attempt = 0; attempt < 5; ++attempt) {  // another process may take the port we picked
    port_ = free_port();
    const auto conf = work / "nginx.conf";
    const std::string w = work.string();
    // As root, nginx's workers would run as nobody, who may not enter the test directories.
    std::ofstream(conf) << (::geteuid() == 0 ? "user root;\n" : "") << "daemon off;\nmaster_process on;\nworker_processes " << workers << ";\n"
                        << "pid " << w << "/nginx.pid;\nerror_log " << w << "/error.log;\n"
                        << "events { worker_connections 1024; }\n"
                        << "http {\n  access_log off;\n"
                        << "  client_body_temp_path " << w << "/client_body;\n  proxy_temp_path " << w << "/proxy;\n"
                        << "  fastcgi_temp_path " << w << "/fastcgi;\n  uwsgi_temp_path " << w << "/uwsgi;\n"
                        << "  scgi_temp_path " << w << "/scgi;\n"
                        << "  default_type application/octet-stream;\n  sendfile on;\n  keepalive_requests 1000000;\n"
                        << "  server {\n    listen 127.0.0.1:" << port_ << ";\n    root " << root.string() << ";\n"
                        << "    location /private/ { deny all; }\n  }\n}\n";
    last_error = child_.start({"/usr/sbin/nginx", "-p", w, "-c", conf.string(), "-e", w + "/error.log"},
                              work / "nginx.stderr");
    if (!last_error.empty()) return last_error;
    if (wait_for_listen(port_, 5000)) return {};
    child_.stop();
    std::ifstream log(work / "error.log");
    last_error = "nginx did not start: " + std::string(std::istreambuf_iterator<char>(log), {});
  }
  return last_error;
}

std::string NginxServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::string FaultProxy::start(int upstream_port, const std::filesystem::path& work) {
  if (auto why = missing_program("/usr/bin/python3", "python3"); !why.empty()) return why;
  std::filesystem::create_directories(work);
  const std::string script = std::string(FERRY_SOURCE_DIR) + "/tests/remote/fault_proxy.py";
  if (auto e = child_.start({"/usr/bin/python3", script, std::to_string(upstream_port)}, work / "proxy.stderr"); !e.empty()) {
    return e;
  }
  port_ = child_.wait_for_port_line(10000);
  if (port_ == 0) return "fault_proxy.py did not start (see " + (work / "proxy.stderr").string() + ")";
  return {};
}

std::string FaultProxy::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

bool FaultProxy::set(const std::string& mode, int count, const std::string& on, int after) {
  return http_get(port_, "/__fault?mode=" + mode + "&count=" + std::to_string(count) + "&on=" + on +
                             "&after=" + std::to_string(after)) == "ok\n";
}

std::string FaultProxy::log() { return http_get(port_, "/__log"); }

std::string S3Server::start(const std::filesystem::path& work, const std::string& bucket,
                            const std::filesystem::path& source) {
  const std::string dir = std::string(FERRY_SOURCE_DIR) + "/tests/remote/s3rver";
  if (auto why = missing_program("/usr/bin/node", "nodejs"); !why.empty()) {
    // The machine's Node.js may live elsewhere on PATH.
    if (::access("/usr/local/bin/node", X_OK) != 0) return why;
  }
  if (!std::filesystem::exists(dir + "/node_modules/@20minutes/s3rver")) {
    return "the S3 test server is not installed: run `npm ci` in tests/remote/s3rver (scripts/install-deps.sh does)";
  }
  std::filesystem::create_directories(work / "data");
  const std::string node = ::access("/usr/bin/node", X_OK) == 0 ? "/usr/bin/node" : "/usr/local/bin/node";
  if (auto e = child_.start({node, dir + "/s3_server.js", (work / "data").string(), bucket, source.string()},
                            work / "s3.stderr");
      !e.empty()) {
    return e;
  }
  port_ = child_.wait_for_port_line(20000);
  if (port_ == 0) return "the S3 test server did not start (see " + (work / "s3.stderr").string() + ")";
  return {};
}

std::string http_get(int port, const std::string& path) {
  const int fd = connect_local(port);
  if (fd < 0) return {};
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return {};
  }
  std::string answer;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  const auto body = answer.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : answer.substr(body + 4);
}

}  // namespace ferry::testing
