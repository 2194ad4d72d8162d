// Bounded, escaped quoting of untrusted text for messages. Messages reach Python as str, so they must
// stay valid UTF-8: raw bytes are escaped, and text is only ever cut before the first byte of a character.
#include "safetensors/text.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "safetensors/json_parse.hpp"

namespace ferry::safetensors::detail {
namespace {

constexpr std::size_t kMaxQuoted = 200;
constexpr std::size_t kMaxExcerpt = 80;
constexpr std::size_t kMaxExcerptDepth = 8;

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

// Only the start of a long string is escaped; the cut falls before the first byte of a character.
void write_string(std::string_view s, std::string& out) {
  std::size_t cut = std::min(s.size(), kMaxExcerpt + 1);
  while (cut < s.size() && cut > 0 && continuation_byte(static_cast<unsigned char>(s[cut]))) --cut;
  out += nlohmann::json(std::string(s.substr(0, cut))).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Compact JSON, written only as far as the limit: a value may be megabytes long, and only its start is shown.
// Depth is bounded by parse_json_object; kMaxExcerptDepth guards values built elsewhere.
void write_excerpt(const nlohmann::json& value, std::string& out, std::size_t depth) {
  using nlohmann::json;
  if (out.size() > kMaxExcerpt) return;
  switch (value.type()) {
    case json::value_t::object:
    case json::value_t::array: {
      const bool object = value.is_object();
      out += object ? '{' : '[';
      if (depth >= kMaxExcerptDepth && !value.empty()) out += "...";
      bool first = true;
      for (auto it = value.begin(); depth < kMaxExcerptDepth && it != value.end() && out.size() <= kMaxExcerpt; ++it) {
        if (!first) out += ',';
        first = false;
        if (object) {
          write_string(it.key(), out);
          out += ':';
        }
        write_excerpt(*it, out, depth + 1);
      }
      out += object ? '}' : ']';
      return;
    }
    case json::value_t::string:
      write_string(value.get_ref<const std::string&>(), out);
      return;
    case json::value_t::binary:
      if (value.get_binary().has_subtype() && value.get_binary().subtype() == kNumberTextSubtype) {
        const auto& text = value.get_binary();
        out += escaped(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), kMaxExcerpt, true);
        return;
      }
      out += "<binary>";
      return;
    default:
      out += value.dump();  // null, a boolean or a number: a few characters
  }
}

}  // namespace

std::string quoted_text(std::string_view text) { return "\"" + escaped(text, kMaxQuoted, false) + "\""; }

std::string json_excerpt(const nlohmann::json& value) {
  std::string text;
  write_excerpt(value, text, 0);
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
