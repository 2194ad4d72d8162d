// `ferry read` and `ferry write` (registered by main.cpp): each returns the exit status; a bad option throws
// UsageError.
#pragma once

#include <string>

#include "cli_common.hpp"

namespace ferry::cli {

int run_read(const std::string& path, const std::string& offset, const std::string& size, bool verify,
             const CommonOptions& o);
int run_write(const std::string& path, const std::string& size, bool no_sync, const CommonOptions& o);

}  // namespace ferry::cli
