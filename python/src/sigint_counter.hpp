// Counts the SIGINTs (Ctrl-C) that reach the process, so that a Future dropped after one can be cancelled
// rather than waited for even where Python's error indicator no longer says so. Python 3.12 inlines list
// comprehensions: when a KeyboardInterrupt leaves one, the half-built list is released by the
// comprehension's own clean-up handler, after the interpreter took the exception off the thread state.
#pragma once

#include <cstdint>

namespace ferry::python {

/// Puts a counting handler in front of the SIGINT handler installed now (Python's), which it calls on.
/// Does nothing where SIGINT is ignored or has its default action (no Python handler to chain to). A later
/// signal.signal(SIGINT, ...) replaces the counter: from then on only the error indicator tells.
void install_sigint_counter();

/// SIGINTs counted so far.
std::uint64_t sigint_count();

}  // namespace ferry::python
