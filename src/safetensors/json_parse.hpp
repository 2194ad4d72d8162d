// Strict JSON for checkpoint headers and index files: a top-level object, and no key twice in one object
// (nlohmann keeps the last value silently; two readers that disagree on which value counts is how
// polyglot files are made).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ferry::safetensors::detail {

/// Parses `text` into `out`. False with `error` set ("not valid JSON: ...", "the key "x" appears twice in
/// one object", "the top level is not a JSON object") otherwise.
bool parse_json_object(std::string_view text, nlohmann::json& out, std::string& error);

}  // namespace ferry::safetensors::detail
