// Documents and failures of Ferry's commands: see ferry_tooling/command_output.hpp.
#include "ferry_tooling/command_output.hpp"

#include <iostream>

#include "ferry_tooling/json_text.hpp"

namespace ferry::tooling {
namespace {

std::string g_program = "ferry";
bool g_json_errors = false;
bool g_json_error_printed = false;
std::string g_command;

void print_json_error(const Status& status, int exit_status) {
  if (!g_json_errors || g_json_error_printed) return;
  g_json_error_printed = true;
  print_json(error_json(status, exit_status, g_command));
}

}  // namespace

void set_command(const std::string& program, bool json_errors, const std::string& command) {
  g_program = program;
  g_json_errors = json_errors;
  g_command = command;
}

void print_json(const nlohmann::json& document) { std::cout << json_dump(document) << "\n" << std::flush; }

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

}  // namespace ferry::tooling
