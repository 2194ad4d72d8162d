// Strict JSON for checkpoint headers and index files: a top-level object, no key twice in one object
// (nlohmann keeps the last value silently; two readers that disagree on which value counts is how
// polyglot files are made), no NUL byte (nlohmann's lexer would end the text there), and no nesting deeper
// than either format needs (anything recursive over a value, dump() and the destructor among them, could
// otherwise overflow the stack). Parsing time is linear in the text's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ferry::safetensors::detail {

/// Arrays and objects nested deeper than this are refused. A header needs three levels (the root, a
/// tensor's entry, its shape); index files' "metadata" may nest a little.
inline constexpr std::size_t kMaxJsonDepth = 16;

/// The subtype of the binary values that stand for numbers other than integers in [0, 2^64) ("-1", "1.5",
/// "-0", "1e3", "18446744073709551616"): their bytes are the number's source text. Neither format accepts
/// such a number anywhere, so the value only has to be refused, and a message can then quote it as
/// written (json_excerpt) rather than as nlohmann would print its double ("-0" is not "0").
inline constexpr std::uint8_t kNumberTextSubtype = 0x4e;  // 'N'

/// Parses `text` into `out`. False with `error` set otherwise: "not valid JSON: ...", "the key "x"
/// appears twice in one object", "the top level is not a JSON object", "byte N is NUL ...", "arrays and
/// objects are nested more than 16 deep ...".
bool parse_json_object(std::string_view text, nlohmann::json& out, std::string& error);

}  // namespace ferry::safetensors::detail
