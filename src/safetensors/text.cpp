// Bounded, escaped quoting of untrusted text for messages. Messages reach Python as str, so they must
// stay valid UTF-8: raw bytes are escaped, and text is only ever cut before the first byte of a character.
#include "safetensors/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ferry::safetensors::detail {
namespace {

constexpr std::size_t kMaxQuoted = 200;
constexpr std::size_t kMaxExcerpt = 80;

bool continuation_byte(unsigned char c) { return (c & 0xC0) == 0x80; }

// Escapes quotes, backslashes and control characters (and, with `escape_high`, every byte >= 0x80), and
// stops after about `limit` bytes, at a character boundary.
std::string escaped(std::string_view text, std::size_t limit, bool escape_high) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (i >= limit && (escape_high || !continuation_byte(c))) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f || (escape_high && c >= 0x80)) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

std::string quoted_text(std::string_view text) { return "\"" + escaped(text, kMaxQuoted, false) + "\""; }

std::string json_excerpt(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::size_t cut = kMaxExcerpt;
  if (text.size() <= cut) return text;
  while (cut > 0 && continuation_byte(static_cast<unsigned char>(text[cut]))) --cut;
  return text.substr(0, cut) + "...";
}

std::string bytes_excerpt(std::string_view bytes) { return "\"" + escaped(bytes, kMaxExcerpt, true) + "\""; }

std::string json_error_text(std::string_view what) {
  if (!what.empty() && what.front() == '[') {
    std::size_t close = what.find("] ");
    if (close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  // nlohmann quotes the bytes it stopped at ("last read: '...'"), which may be any bytes at all.
  return escaped(what, 400, true);
}

}  // namespace ferry::safetensors::detail
