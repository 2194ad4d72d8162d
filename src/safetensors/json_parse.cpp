// parse_json_object: nlohmann's parser with a callback that watches for repeated keys.
#include "safetensors/json_parse.hpp"

#include <optional>
#include <unordered_set>
#include <vector>

#include "safetensors/text.hpp"

namespace ferry::safetensors::detail {
namespace {

using nlohmann::json;

class DuplicateKeys {
 public:
  bool on_event(json::parse_event_t event, const json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open_.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_.empty()) open_.pop_back();
        break;
      case json::parse_event_t::key:
        if (!first_ && !open_.empty() && parsed.is_string() &&
            !open_.back().insert(parsed.get_ref<const std::string&>()).second) {
          first_ = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;  // keep everything: the callback only watches
  }
  const std::optional<std::string>& first() const { return first_; }

 private:
  std::vector<std::unordered_set<std::string>> open_;  // the keys of each object being parsed
  std::optional<std::string> first_;
};

}  // namespace

bool parse_json_object(std::string_view text, json& out, std::string& error) {
  DuplicateKeys duplicates;
  try {
    out = json::parse(text.begin(), text.end(),
                      [&duplicates](int, json::parse_event_t event, json& parsed) {
                        return duplicates.on_event(event, parsed);
                      });
  } catch (const json::exception& e) {
    error = "not valid JSON: " + json_error_text(e.what());
    return false;
  }
  if (!out.is_object()) {
    error = "the top level is not a JSON object";
    return false;
  }
  if (duplicates.first()) {
    error = "the key " + quoted_text(*duplicates.first()) + " appears twice in one object";
    return false;
  }
  return true;
}

}  // namespace ferry::safetensors::detail
