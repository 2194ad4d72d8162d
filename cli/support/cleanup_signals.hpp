// cli/support/cleanup_signals.hpp: what a command does when SIGINT, SIGTERM or SIGHUP ends it.
//
// Part of cli/support (its CMakeLists.txt says who links it). A program's business, not the library's: the
// library never takes over a process's signals, and only offers the async-signal-safe pieces a handler needs
// (remove_named_temporary for the output file being written, report_signal for the message).
// Thread safety: for a program's main thread, before it starts other threads.
#pragma once

namespace ferry::cli {

/// Handlers for SIGINT, SIGTERM and SIGHUP (each unless ignored when the process started, as under nohup):
/// remove the temporary file that has a name at that moment (the output file's rules), report the
/// interruption (report_signal in command_output.hpp: a message, and with --json an error object), then die
/// of the same signal, so that the shell sees 128 + N (130 for SIGINT, 143 for SIGTERM). Idempotent.
void install_cleanup_signal_handlers();

}  // namespace ferry::cli
