// Real servers for the remote tests, started and stopped by the tests on loopback: nginx serving a
// directory, the fault-injecting proxy (fault_proxy.py) in front of it, and an S3-compatible server
// (s3rver/s3_server.js). Each runs as a child process with its stdin on a pipe, so it also stops when
// the test process dies; the destructor stops it (SIGTERM, then SIGKILL) and reaps it.
// Thread safety: a server object belongs to one test.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace ferry::testing {

/// A child process. start() returns an empty string or why it failed.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { stop(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  std::string start(const std::vector<std::string>& argv, const std::filesystem::path& log);
  /// Reads the child's stdout until a line "port N"; returns N, or 0 after `timeout_ms`.
  int wait_for_port_line(int timeout_ms);
  void stop();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
};

/// Why `program` cannot be run here, or "" when it can (an absolute path that is executable).
std::string missing_program(const std::string& program, const std::string& package);

/// A free TCP port on 127.0.0.1 at the time of asking.
int free_port();
/// Waits until 127.0.0.1:port accepts connections; false after `timeout_ms`.
bool wait_for_listen(int port, int timeout_ms);

/// nginx serving `root` on 127.0.0.1:port(), with /private/ answering 403.
class NginxServer {
 public:
  /// Empty when running; else why not (the test should GTEST_SKIP with it when nginx is missing).
  std::string start(const std::filesystem::path& root, const std::filesystem::path& work, int worker_processes = 1);
  int port() const { return port_; }
  std::string url(const std::string& path) const;
  void stop() { child_.stop(); }

 private:
  ChildProcess child_;
  int port_ = 0;
};

/// tests/remote/fault_proxy.py in front of an upstream port.
class FaultProxy {
 public:
  std::string start(int upstream_port, const std::filesystem::path& work);
  int port() const { return port_; }
  std::string url(const std::string& path) const;
  /// Sets the fault (see fault_proxy.py): e.g. set("status:503", 2), applied after `after` requests that
  /// it would have matched. Returns false when the proxy did not answer.
  bool set(const std::string& mode, int count = -1, const std::string& on = "GET", int after = 0);
  /// What the proxy forwarded since the last set(): JSON text.
  std::string log();

 private:
  ChildProcess child_;
  int port_ = 0;
};

/// The S3 server of tests/remote/s3rver, with one bucket filled from `source`.
class S3Server {
 public:
  std::string start(const std::filesystem::path& work, const std::string& bucket, const std::filesystem::path& source);
  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  static constexpr const char* kAccessKey = "S3RVER";
  static constexpr const char* kSecretKey = "S3RVER";

 private:
  ChildProcess child_;
  int port_ = 0;
};

/// A plain HTTP/1.0 GET to 127.0.0.1:port; returns the body ("" on failure).
std::string http_get(int port, const std::string& path);

}  // namespace ferry::testing
