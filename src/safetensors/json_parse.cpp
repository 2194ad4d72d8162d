// parse_json_object: nlohmann's SAX parser (iterative, so deep input cannot overflow the stack) feeding a
// value builder of our own, which refuses repeated keys and deep nesting as it goes. nlohmann's callback
// parser, used before, rescanned the parent object after every child object: quadratic in the tensors.
#include "safetensors/json_parse.hpp"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "safetensors/text.hpp"

namespace ferry::safetensors::detail {
namespace {

using nlohmann::json;

class ValueBuilder {
 public:
  explicit ValueBuilder(json& root) : root_(root) {}

  bool null() { return add(json(nullptr)); }
  bool boolean(bool v) { return add(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return add(json(v)); }
  // JSON integers have no '+' and no leading zeros, so the value gives back the text; only "-0" reads as 0.
  bool number_integer(json::number_integer_t v) { return add(number_text(v == 0 ? "-0" : std::to_string(v))); }
  bool number_float(json::number_float_t, const std::string& text) { return add(number_text(text)); }
  bool string(std::string& v) { return add(json(std::move(v))); }
  bool binary(json::binary_t&) { return fail("binary values are not JSON"); }  // only binary formats send these

  bool start_object(std::size_t) { return open(json::object()); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    auto& object = open_.back()->get_ref<json::object_t&>();
    auto [it, added] = object.emplace(std::move(k), nullptr);
    if (!added) return fail("the key " + quoted_text(it->first) + " appears twice in one object");
    slot_ = &it->second;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    return fail("not valid JSON: " + json_error_text(e.what()));
  }

  const std::string& error() const { return error_; }

 private:
  static json number_text(const std::string& text) {
    return json::binary(json::binary_t::container_type(text.begin(), text.end()), kNumberTextSubtype);
  }

  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }

  // Where the next value goes: the root, the end of the innermost open array, or the slot of the key
  // just read. The open chain's pointers stay valid: a container only grows once its open child closed.
  json* place(json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.get_ref<json::array_t&>().push_back(std::move(value));
      return &parent.get_ref<json::array_t&>().back();
    }
    *slot_ = std::move(value);
    return slot_;
  }

  bool add(json&& scalar) {
    if (open_.empty()) return fail("the top level is not a JSON object");
    place(std::move(scalar));
    return true;
  }

  bool open(json&& container) {
    if (open_.empty() && !container.is_object()) return fail("the top level is not a JSON object");
    if (open_.size() == kMaxJsonDepth) {
      return fail(fmt::format("arrays and objects are nested more than {} deep (a safetensors header needs 3)",
                              kMaxJsonDepth));
    }
    open_.push_back(place(std::move(container)));
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  json& root_;
  std::vector<json*> open_;  // the arrays and objects being filled, outermost first
  json* slot_ = nullptr;
  std::string error_;
};

}  // namespace

bool parse_json_object(std::string_view text, json& out, std::string& error) {
  // nlohmann's lexer takes NUL for the end of the input and would ignore whatever follows it.
  if (std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    error = fmt::format("byte {} is NUL (0x00), which JSON text cannot hold (only spaces may follow the object)",
                        nul);
    return false;
  }
  out = json();
  ValueBuilder builder(out);
  if (!json::sax_parse(text.begin(), text.end(), &builder)) {
    error = builder.error().empty() ? "not valid JSON" : builder.error();
    out = json();
    return false;
  }
  return true;
}

}  // namespace ferry::safetensors::detail
