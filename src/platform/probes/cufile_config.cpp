// cufile.json reading.
#include "platform/probes/cufile_config.hpp"

#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "platform/probes/probe_fs.hpp"

namespace ferry::detail::probes {

CuFileConfig cufile_config_defaults() {
  CuFileConfig c;
  c.allow_compat_mode = {false, true, "properties.allow_compat_mode"};
  c.use_pci_p2pdma = {false, true, "properties.use_pci_p2pdma"};
  c.max_direct_io_size_kb = {16384, true, "properties.max_direct_io_size_kb"};
  c.posix_pool_slab_size_kb = {{4, 1024, 16384}, true, "properties.posix_pool_slab_size_kb"};
  c.posix_pool_slab_count = {{128, 64, 64}, true, "properties.posix_pool_slab_count"};
  c.cufile_stats = {0, true, "profile.cufile_stats"};
  c.logging_dir = {"", true, "logging.dir"};
  c.logging_level = {"ERROR", true, "logging.level"};
  return c;
}

std::string strip_json_comments(std::string_view t) {
  std::string out(t);
  bool in_string = false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    if (in_string) {
      if (c == '\\') ++i;  // skip the escaped character (\" stays inside the string)
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      out[i] = out[i + 1] = ' ';
      i += 2;
      while (i < out.size() && !(out[i] == '*' && i + 1 < out.size() && out[i + 1] == '/')) {
        if (out[i] != '\n') out[i] = ' ';
        ++i;
      }
      if (i < out.size()) out[i] = out[i + 1] = ' ', ++i;
    }
  }
  return out;
}

static std::pair<std::size_t, std::size_t> line_col(std::string_view t, std::size_t byte) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < byte && i < t.size(); ++i) {
    if (t[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return {line, col};
}

using nlohmann::json;

// Looks up "a.b" in `root`; nullptr when any level is missing.
static const json* find_key(const json& root, std::string_view dotted) {
  const json* cur = &root;
  std::size_t i = 0;
  while (i <= dotted.size()) {
    std::size_t j = std::min(dotted.find('.', i), dotted.size());
    std::string k(dotted.substr(i, j - i));
    if (!cur->is_object() || !cur->contains(k)) return nullptr;
    cur = &(*cur)[k];
    i = j + 1;
  }
  return cur;
}

template <typename T, typename Get>
static void take(const json& root, CuFileSetting<T>& s, CuFileConfig& c, const char* want, Get get) {
  const json* v = find_key(root, s.key);
  if (v == nullptr) {
    c.evidence.push_back(fmt::format("{}: absent, default", s.key));
    return;
  }
  if (get(*v, s.value)) {
    s.is_default = false;
    c.evidence.push_back(fmt::format("{}: {}", s.key, v->dump()));
  } else {
    c.warnings.push_back(fmt::format("{}: expected {}, found {}; cuFile's default applies", s.key, want, v->dump()));
  }
}

Result<CuFileConfig> parse_cufile_config(std::string_view text, std::string_view path) {
  std::string clean = strip_json_comments(text);
  json root;
  try {
    root = json::parse(clean);
  } catch (const json::parse_error& e) {
    // byte is 1-based and points just past the offending character.
    auto [line, col] = line_col(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    if (auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
    return Status(ErrorCode::invalid_argument, fmt::format("{}:{}:{}: {}", path, line, col, what), 0,
                  std::string(path));
  }
  if (!root.is_object())
    return Status(ErrorCode::invalid_argument, fmt::format("{}: top level is not a JSON object", path), 0,
                  std::string(path));
  CuFileConfig c = cufile_config_defaults();
  c.path = std::string(path);
  c.file_found = true;
  auto get_bool = [](const json& v, bool& out) { return v.is_boolean() ? (out = v.get<bool>(), true) : false; };
  auto get_u64 = [](const json& v, std::uint64_t& out) {
    return v.is_number_unsigned() ? (out = v.get<std::uint64_t>(), true) : false;
  };
  auto get_int = [](const json& v, int& out) { return v.is_number_integer() ? (out = v.get<int>(), true) : false; };
  auto get_str = [](const json& v, std::string& out) { return v.is_string() ? (out = v.get<std::string>(), true) : false; };
  // Slab lists are arrays; a single number is accepted as a one-element list.
  auto get_list = [](const json& v, std::vector<std::uint64_t>& out) {
    std::vector<std::uint64_t> r;
    if (v.is_number_unsigned()) r.push_back(v.get<std::uint64_t>());
    else if (v.is_array()) {
      for (const auto& x : v) {
        if (!x.is_number_unsigned()) return false;
        r.push_back(x.get<std::uint64_t>());
      }
    } else return false;
    out = std::move(r);
    return true;
  };
  take(root, c.allow_compat_mode, c, "a boolean", get_bool);
  take(root, c.use_pci_p2pdma, c, "a boolean", get_bool);
  take(root, c.max_direct_io_size_kb, c, "a non-negative integer", get_u64);
  take(root, c.posix_pool_slab_size_kb, c, "an array of non-negative integers", get_list);
  take(root, c.posix_pool_slab_count, c, "an array of non-negative integers", get_list);
  take(root, c.cufile_stats, c, "an integer", get_int);
  take(root, c.logging_dir, c, "a string", get_str);
  take(root, c.logging_level, c, "a string", get_str);
  if (c.posix_pool_slab_size_kb.value.size() != c.posix_pool_slab_count.value.size())
    c.warnings.push_back(fmt::format("posix_pool_slab_size_kb has {} entries but posix_pool_slab_count has {}",
                                     c.posix_pool_slab_size_kb.value.size(),
                                     c.posix_pool_slab_count.value.size()));
  return c;
}

std::string cufile_config_path(const char* env_value) {
  return env_value != nullptr && *env_value != '\0' ? std::string(env_value) : std::string("/etc/cufile.json");
}

Result<CuFileConfig> probe_cufile_config(const std::filesystem::path& root, std::optional<std::string> env_value) {
  if (!env_value) {
    const char* e = std::getenv("CUFILE_ENV_PATH_JSON");
    env_value = e ? std::string(e) : std::string();
  }
  std::string path = cufile_config_path(env_value->c_str());
  std::string source = env_value->empty() ? "default path" : "CUFILE_ENV_PATH_JSON";
  auto text = read_file_bytes(under_root(root, path));
  if (!text.ok()) {
    if (text.status().code() != ErrorCode::not_found) return text.status();
    CuFileConfig c = cufile_config_defaults();
    c.path = path;
    c.path_source = source;
    c.evidence.push_back(fmt::format("{} ({}): absent; cuFile uses its built-in defaults", path, source));
    return c;
  }
  FERRY_ASSIGN_OR_RETURN(CuFileConfig c, parse_cufile_config(*text, path));
  c.path_source = source;
  c.evidence.insert(c.evidence.begin(), fmt::format("{} ({}): parsed", path, source));
  return c;
}

}  // namespace ferry::detail::probes
