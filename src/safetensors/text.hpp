// Quoting untrusted text (tensor names, JSON values, raw bytes) for error messages: bounded in length,
// control characters escaped, so that a hostile header cannot flood or garble a message.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace ferry::safetensors::detail {

/// "\"name\"", escaped, at most about 200 characters (then "...").
std::string quoted_text(std::string_view text);
/// A JSON value as compact JSON, at most about 80 characters; only that much of the value is ever written
/// out, whatever its size. Numbers parse_json_object kept as text appear as written.
std::string json_excerpt(const nlohmann::json& value);
/// Raw bytes as a quoted, escaped string.
std::string bytes_excerpt(std::string_view bytes);
/// nlohmann's exception text without its "[json.exception.parse_error.101] " prefix.
std::string json_error_text(std::string_view what);

}  // namespace ferry::safetensors::detail
