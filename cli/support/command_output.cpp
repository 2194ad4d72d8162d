// Documents and failures of Ferry's commands: see cli/support/command_output.hpp.
#include "cli/support/command_output.hpp"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <iostream>

#include "cli/support/json_text.hpp"

namespace ferry::cli {
namespace {

std::string g_program = "ferry";
bool g_json_errors = false;
bool g_json_error_printed = false;
std::string g_command;
// Set before a document's first byte is printed: a signal handler then leaves stdout alone.
volatile std::sig_atomic_t g_document_started = 0;

// What report_signal writes, prepared by set_command for each signal that ends a command.
struct SignalText {
  int sig;
  const char* name;
  std::string stderr_text;
  std::string json_text;  // empty without --json
};
SignalText g_signal_texts[] = {{SIGINT, "SIGINT", {}, {}}, {SIGTERM, "SIGTERM", {}, {}}, {SIGHUP, "SIGHUP", {}, {}}};

void print_json_error(const Status& status, int exit_status) {
  if (!g_json_errors || g_json_error_printed) return;
  g_json_error_printed = true;
  print_json(error_json(status, exit_status, g_command));
}

void write_all(int fd, const std::string& text) noexcept {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

void set_command(const std::string& program, bool json_errors, const std::string& command) {
  g_program = program;
  g_json_errors = json_errors;
  g_command = command;
  // On a terminal the message starts by erasing a progress line that may be shown (progress.hpp).
  const char* erase = ::isatty(STDERR_FILENO) == 1 ? "\r\033[K" : "";
  for (SignalText& t : g_signal_texts) {
    Status cancelled(ErrorCode::cancelled, std::string("interrupted by ") + t.name);
    t.stderr_text = erase + g_program + ": " + cancelled.to_string() + "\n";
    t.json_text = json_errors ? json_dump(error_json(cancelled, 128 + t.sig, command)) + "\n" : std::string();
  }
}

void report_signal(int sig) noexcept {
  int saved = errno;
  for (const SignalText& t : g_signal_texts) {
    if (t.sig != sig) continue;
    write_all(STDERR_FILENO, t.stderr_text);
    if (!t.json_text.empty() && !g_document_started) {
      g_document_started = 1;
      write_all(STDOUT_FILENO, t.json_text);
    }
  }
  errno = saved;
}

void print_json(const nlohmann::json& document) {
  std::string text = json_dump(document) + "\n";
  g_document_started = 1;
  std::cout << text << std::flush;
}

void print_error(const std::string& message) { std::cerr << g_program << ": " << message << "\n"; }

int fail(const Status& status, int exit_status) {
  print_error(status.to_string());
  print_json_error(status, exit_status);
  return exit_status;
}

int fail(ErrorCode code, const std::string& message, int exit_status) {
  print_error(message);
  print_json_error(Status(code, message), exit_status);
  return exit_status;
}

nlohmann::json error_json(const Status& status, int exit_status, const std::string& command) {
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  nlohmann::json j;
  j["schema"] = kErrorSchema;
  j["command"] = or_null(command);
  j["code"] = error_code_name(status.code());
  j["message"] = status.to_string();
  j["path"] = or_null(status.path());
  j["errno"] = status.sys_errno() == 0
                   ? nlohmann::json(nullptr)
                   : nlohmann::json{{"name", errno_name(status.sys_errno())}, {"number", status.sys_errno()}};
  j["exit_status"] = exit_status;
  return j;
}

}  // namespace ferry::cli
