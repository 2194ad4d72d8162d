// JSON text that never fails on bytes that are not UTF-8: see json_text.hpp.
#include "report/json_text.hpp"

#include <cstdint>

namespace ferry::detail {
namespace {

// The length of the valid UTF-8 sequence starting at s[i] (1 to 4), or 0 when none starts there. Strict as
// Python's decoder is: no overlong forms, no encoded surrogates, nothing above U+10FFFF.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b = byte(i);
  if (b < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;  // overlong below U+0800
    if (b == 0xED) hi = 0x9F;  // U+D800..U+DFFF are not characters
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;  // overlong below U+10000
    if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

bool valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = utf8_sequence_length(text, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

namespace {

void append_quoted(std::string& out, std::string_view text) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      std::size_t n = utf8_sequence_length(text, i);
      if (n == 0) {
        // Python's surrogateescape: the byte 0xXY is the code point U+DCXY.
        out += "\\udc";
        out += kHex[c >> 4];
        out += kHex[c & 0xF];
        i += 1;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

void append_value(std::string& out, const nlohmann::json& v, int indent, int depth) {
  auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level), ' ');
  };
  if (v.is_string()) {
    append_quoted(out, v.get_ref<const std::string&>());
  } else if (v.is_object() || v.is_array()) {
    const bool object = v.is_object();
    if (v.empty()) {
      out += object ? "{}" : "[]";
      return;
    }
    out += object ? '{' : '[';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ',';
      first = false;
      newline(depth + 1);
      if (object) {
        append_quoted(out, it.key());
        out += indent < 0 ? ":" : ": ";
      }
      append_value(out, it.value(), indent, depth + 1);
    }
    newline(depth);
    out += object ? '}' : ']';
  } else {
    out += v.dump();  // numbers, booleans, null: nothing to encode
  }
}

}  // namespace

std::string json_quote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  append_quoted(out, text);
  return out;
}

std::string json_dump(const nlohmann::json& value, int indent) {
  std::string out;
  append_value(out, value, indent, 0);
  return out;
}

}  // namespace ferry::detail
