// cli/support/json_text.hpp: JSON documents as Ferry prints them, for Ferry's own tools.
//
// Part of cli/support (its CMakeLists.txt says who links it). The `ferry` command's --json documents
// embed route reports and quote file names, which on Linux are bytes and need not be UTF-8; these are the
// library's own writer and report value (src/report/json_text.hpp explains the encoding), so that the CLI's
// JSON and Report::to_json() can never disagree.
// Thread safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ferry/route.hpp"

namespace ferry::cli {

/// `value` as JSON text, formatted as value.dump(indent) formats it (compact when indent < 0). Strings that are
/// not UTF-8 are written as Python's "surrogateescape" reads them back. Never throws for such strings.
std::string json_dump(const nlohmann::json& value, int indent = -1);

/// The value behind Report::to_json(), to embed in a larger document.
nlohmann::json report_json(const Report& report);

}  // namespace ferry::cli
