// JSON text that never fails on bytes that are not UTF-8.
//
// File names on Linux are bytes, and messages quote them. nlohmann::json::dump() throws (type_error 316)
// on a string that is not valid UTF-8, which turned `--json` on such a name into an abort. Every JSON
// document Ferry prints (the CLI's --json, Report::to_json(), the doctor's JSON) is therefore written by
// json_dump(), which encodes each string the way Python's "surrogateescape" error handler decodes bytes:
// valid UTF-8 stays as it is, and each byte that is not part of a valid UTF-8 sequence (always 0x80..0xFF)
// becomes the code point U+DC80..U+DCFF, written as the escape "\udcXY". Python's json.loads() then gives
// the same str as os.fsdecode(), and os.fsencode() of it gives back the exact bytes. Strict JSON parsers
// that reject lone surrogates (nlohmann's among them) cannot read such a document back: parse Ferry's JSON
// with Python, or keep the nlohmann::json value (report_json()) instead of its text.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ferry/route.hpp"

namespace ferry::detail {

/// `text` as a JSON string literal, quotes included, with the encoding described above. For valid UTF-8 this
/// is what serde_json writes (the safetensors reference's header writer relies on it): '"' and '\' escaped,
/// \b \f \n \r \t, other control characters as \u00xx in lowercase hex, everything else as it is.
std::string json_quote(std::string_view text);

/// Whether `text` is valid UTF-8, as strictly as Python's decoder checks it (no overlong forms, no encoded
/// surrogates, nothing above U+10FFFF).
bool valid_utf8(std::string_view text);

/// `value` as JSON text, formatted as value.dump(indent) formats it (compact when indent < 0), with every
/// string (and key) written by json_quote(). Never throws for strings that are not UTF-8.
std::string json_dump(const nlohmann::json& value, int indent = -1);

/// The value behind Report::to_json(), to embed in a larger document without printing and parsing it.
nlohmann::json report_json(const Report& report);

}  // namespace ferry::detail
