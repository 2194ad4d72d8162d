// `ferry doctor`: the command-line face of ferry::run_doctor (include/ferry/doctor.hpp).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace ferry::cli {

struct DoctorCommandOptions {
  std::string path;
  int device = 0;
  bool probe = false;
  bool require_gds = false;
  bool json = false;
  std::string compat;  // empty: the environment's or the default
};

/// The exit-status paragraph of `ferry doctor --help`.
extern const char* const kDoctorFooter;

/// Adds the `doctor` subcommand's arguments to `cmd`.
void add_doctor_options(CLI::App& cmd, DoctorCommandOptions& o);

/// Runs the doctor and prints its report; returns the exit status (0, 1, 4; 2 for a bad command line).
int run_doctor_command(const DoctorCommandOptions& o);

}  // namespace ferry::cli
