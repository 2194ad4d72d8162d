// Config: defaults, FERRY_* environment variables, setters, and the settings table.
#include "ferry/config.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "base/ascii.hpp"
#include "base/fork_guard.hpp"
#include "base/process_limits.hpp"

namespace ferry {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kGiB = 1024 * kMiB;
constexpr std::uint64_t kTiB = 1024 * kGiB;
constexpr std::uint64_t kPage = 4096;

// Bounds of the numeric settings. Config::set rejects values outside them, naming the setting (or variable),
// the value and the bounds; the setters clamp. They are wide enough for any machine we know of and narrow
// enough that a typo cannot start thousands of threads or pin terabytes.
constexpr unsigned kMinThreads = 1, kMaxThreads = 256;  // 256 threads x 2 bounce buffers of 4 MiB = 2 GiB pinned
constexpr std::uint64_t kMaxTaskSize = kGiB;
constexpr std::uint64_t kMaxGdsThreshold = kTiB;       // larger than any request that fits in GPU memory
constexpr std::uint64_t kMaxBounceBufferSize = 256 * kMiB;
constexpr unsigned kMinBounceBuffers = 2, kMaxBounceBuffers = 64;
// Remote objects: a request per connection, so 256 connections is 256 threads; an hour bounds every wait.
constexpr unsigned kMaxConnections = 256, kMaxRetries = 100;
constexpr unsigned kMaxMilliseconds = 3600 * 1000;
constexpr std::uint64_t kMaxMinRate = kTiB;
// The smallest budget holds what one piece of work needs at once: a save's two 32 MiB windows, a worker's
// bounce buffers at the defaults (2 x 4 MiB) many times over.
constexpr std::uint64_t kMinPinnedBudget = 64 * kMiB, kMaxPinnedBudget = 64 * kTiB;

// Rounds up to whole pages within [kPage, max] (max is a multiple of kPage), without wrapping near 2^64.
std::uint64_t page_round_clamped(std::uint64_t bytes, std::uint64_t max) {
  if (bytes >= max) return max;
  return std::max(kPage, (bytes + kPage - 1) / kPage * kPage);
}

// A quarter of the memory this process may use (a container's limit, where that is less than the machine's):
// the most background saves staged before there was a budget, and room for every worker's bounce buffers many
// times over.
std::uint64_t default_pinned_budget() {
  const std::uint64_t memory = detail::usable_memory_bytes();
  return std::clamp((memory != 0 ? memory : 4 * kGiB) / 4 / kPage * kPage, kMinPinnedBudget, kMaxPinnedBudget);
}

// The cores this process may use (its affinity mask, a container's CPU quota), clamped: cold reads want several
// requests at the disk even on few cores, and workers beyond the cores do not help (on the H200 machine's 16
// cores, 24 and 32 read batches of small pieces at 0.77-0.98x of 16: bench/NOTES.md).
unsigned default_threads() { return std::clamp(detail::usable_cores(), 4u, 16u); }

Status bad_value(std::string_view setting, std::string_view text, std::string_view expected) {
  return Status(ErrorCode::invalid_argument,
                fmt::format("{}: cannot use \"{}\" (expected {})", setting, text, expected));
}

// What a size's text says: bytes, a number past 16 EiB, or no size at all. parse_size and the bounded
// parsers word their refusals from the kind, never from each other's messages.
struct SizeText {
  enum class Kind { size, too_large, not_a_size } kind = Kind::not_a_size;
  std::uint64_t bytes = 0;
};

SizeText read_size_text(std::string_view text) {
  std::string t = detail::ascii_lower(text);
  // Trim surrounding blanks: environment values often carry them.
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  std::size_t start = 0;
  while (start < t.size() && std::isspace(static_cast<unsigned char>(t[start]))) ++start;
  t.erase(0, start);
  std::size_t digits = 0;
  while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  if (digits == 0) return {};

  std::uint64_t number = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    std::uint64_t d = static_cast<std::uint64_t>(t[i] - '0');
    if (number > (UINT64_MAX - d) / 10) return {SizeText::Kind::too_large};
    number = number * 10 + d;
  }
  std::string suffix = t.substr(digits);
  while (!suffix.empty() && suffix.front() == ' ') suffix.erase(0, 1);

  static const std::pair<const char*, std::uint64_t> kSuffixes[] = {
      {"", 1},           {"b", 1},
      {"k", 1ull << 10}, {"kib", 1ull << 10}, {"kb", 1000ull},
      {"m", 1ull << 20}, {"mib", 1ull << 20}, {"mb", 1000ull * 1000},
      {"g", 1ull << 30}, {"gib", 1ull << 30}, {"gb", 1000ull * 1000 * 1000},
      {"t", 1ull << 40}, {"tib", 1ull << 40}, {"tb", 1000ull * 1000 * 1000 * 1000},
  };
  for (const auto& [name, multiplier] : kSuffixes) {
    if (suffix != name) continue;
    if (number > UINT64_MAX / multiplier) return {SizeText::Kind::too_large};
    return {SizeText::Kind::size, number * multiplier};
  }
  return {};
}

Result<unsigned> parse_count(std::string_view text, std::string_view setting, unsigned min, unsigned max) {
  std::string expected = fmt::format("a whole number from {} to {}", min, max);
  // Counts are plain numbers: "4k threads" is more likely a slip than a wish.
  std::string t(text);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  t.erase(0, std::min(t.size(), t.find_first_not_of(" \t")));
  if (t.empty() || !std::all_of(t.begin(), t.end(), [](unsigned char c) { return std::isdigit(c); }))
    return bad_value(setting, text, expected);
  auto n = parse_size(t, setting);
  if (!n.ok() || *n < min || *n > max) return bad_value(setting, text, expected);
  return static_cast<unsigned>(*n);
}

// A size within [min, max]; `rounding` is appended to the expectation ("; rounded up to 4 KiB").
Result<std::uint64_t> parse_bounded_size(std::string_view text, std::string_view setting, std::uint64_t min,
                                         std::uint64_t max, std::string_view rounding = {}) {
  std::string expected = fmt::format("a size from {} to {}{}", min == 0 ? "0" : min == 1 ? "1 byte" : format_size(min),
                                     format_size(max), rounding);
  const SizeText n = read_size_text(text);
  if (n.kind == SizeText::Kind::not_a_size) return parse_size(text, setting);  // its refusal names the forms
  if (n.kind == SizeText::Kind::too_large || n.bytes < min || n.bytes > max) return bad_value(setting, text, expected);
  return n.bytes;
}

// Text settings that end up in a request or a file name: printable ASCII, no blanks (empty = look it up).
Status check_word(std::string_view text, std::string_view setting) {
  for (unsigned char c : text) {
    if (c <= ' ' || c >= 0x7f) return bad_value(setting, text, "printable ASCII without blanks");
  }
  return Status();
}

template <typename Enum>
Result<Enum> parse_choice(std::string_view text, std::string_view setting,
                          std::initializer_list<std::pair<const char*, Enum>> choices) {
  std::string t = detail::ascii_lower(text);
  std::string names;
  for (const auto& [name, value] : choices) {
    if (t == name) return value;
    if (*name == '\0') continue;  // an accepted spelling of the default ("" = unset), not worth listing
    names += names.empty() ? "" : ", ";
    names += name;
  }
  return bad_value(setting, text, "one of " + names);
}

// On/off settings: on, 1, true, yes; off, 0, false, no; empty is the default.
Result<bool> parse_flag(std::string_view text, std::string_view setting, bool default_value) {
  return parse_choice<bool>(text, setting,
                            {{"off", false}, {"on", true}, {"0", false}, {"1", true}, {"false", false},
                             {"true", true}, {"no", false}, {"yes", true}, {"", default_value}});
}

// How the rows below reach a value: `Target` is a setter of Config (&Config::set_threads) or a field of
// Config::remote() (&RemoteSettings::connections), so that a row names its value once.
template <auto Target, typename T>
Status store(Config& c, T value) {
  if constexpr (std::is_member_function_pointer_v<decltype(Target)>) {
    (c.*Target)(value);
  } else {
    RemoteSettings r = c.remote();
    r.*Target = std::move(value);
    c.set_remote(r);
  }
  return Status();
}

// `Source` is a getter of Config (&Config::threads) or a field of Config::remote().
template <auto Source>
auto value_of(const Config& c) {
  if constexpr (std::is_member_function_pointer_v<decltype(Source)>) {
    return (c.*Source)();
  } else {
    return c.remote().*Source;
  }
}

template <auto Target, unsigned Min, unsigned Max>
Status parse_count_into(Config& c, std::string_view v, const std::string& label) {
  FERRY_ASSIGN_OR_RETURN(unsigned n, parse_count(v, label, Min, Max));
  return store<Target>(c, n);
}

constexpr bool kRoundedToPages = true;  // the setter rounds up to 4 KiB, and the refusal says so

template <auto Target, std::uint64_t Min, std::uint64_t Max, bool RoundedToPages = false>
Status parse_size_into(Config& c, std::string_view v, const std::string& label) {
  FERRY_ASSIGN_OR_RETURN(std::uint64_t n,
                         parse_bounded_size(v, label, Min, Max, RoundedToPages ? ", rounded up to 4 KiB" : ""));
  return store<Target>(c, n);
}

template <auto Target, bool Default>
Status parse_flag_into(Config& c, std::string_view v, const std::string& label) {
  FERRY_ASSIGN_OR_RETURN(bool on, parse_flag(v, label, Default));
  return store<Target>(c, on);
}

template <auto Target>
Status parse_word_into(Config& c, std::string_view v, const std::string& label) {
  FERRY_RETURN_IF_ERROR(check_word(v, label));
  return store<Target>(c, std::string(v));
}

template <auto Source>
std::string number(const Config& c) {
  return std::to_string(value_of<Source>(c));
}

template <auto Source>
std::string on_off(const Config& c) {
  return value_of<Source>(c) ? "on" : "off";
}

}  // namespace

const char* compat_mode_name(CompatMode m) noexcept {
  switch (m) {
    case CompatMode::automatic: return "auto";
    case CompatMode::on: return "on";
    case CompatMode::off: return "off";
  }
  return "?";
}

const char* io_engine_name(IoEngine e) noexcept { return e == IoEngine::io_uring ? "io_uring" : "psync"; }

const char* direct_io_name(DirectIo d) noexcept {
  switch (d) {
    case DirectIo::automatic: return "auto";
    case DirectIo::on: return "on";
    case DirectIo::off: return "off";
  }
  return "?";
}

const char* s3_addressing_name(S3Addressing a) noexcept {
  switch (a) {
    case S3Addressing::automatic: return "automatic";
    case S3Addressing::path: return "path";
    case S3Addressing::virtual_host: return "virtual_host";
  }
  return "?";
}

const char* requirement_name(Requirement r) noexcept { return r == Requirement::gds ? "gds" : "none"; }

const char* setting_source_name(SettingSource s) noexcept {
  switch (s) {
    case SettingSource::default_value: return "default";
    case SettingSource::environment: return "environment";
    case SettingSource::api: return "api";
  }
  return "?";
}

Result<std::uint64_t> parse_size(std::string_view text, std::string_view setting) {
  const SizeText parsed = read_size_text(text);
  switch (parsed.kind) {
    case SizeText::Kind::size: return parsed.bytes;
    case SizeText::Kind::too_large: return bad_value(setting, text, "a size below 16 EiB");
    case SizeText::Kind::not_a_size: break;
  }
  return bad_value(setting, text, "a size such as 4096, 16k, 4MiB or 1GB");
}

std::string format_size(std::uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (v >= 1024.0 && unit < 4) {
    v /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", v, kUnits[unit]);
}

namespace {

// One row per setting: its name, variable, default, documentation, how text becomes its value (with its
// bounds, named in errors) and how its value becomes text. settings_table(), Config::set, Config::get and
// Config::from_environment all walk this list, and tests check docs/settings.md against settings_table(),
// so a setting is added here (plus its typed field and setter) and nowhere else.
struct SettingRow {
  const char* name;
  const char* env;
  const char* default_text;
  const char* description;
  Status (*parse)(Config& config, std::string_view value, const std::string& label);
  std::string (*get)(const Config& config);
};

const SettingRow kSettingRows[] = {
    {"threads", "FERRY_THREADS", "cores this process may use, clamped to 4..16",
     "Worker threads one request may use (1 to 256). Reads of cached data scale with threads until memory "
     "bandwidth; cold O_DIRECT reads want enough requests in flight.",
     parse_count_into<&Config::set_threads, kMinThreads, kMaxThreads>, number<&Config::threads>},
    {"task_size", "FERRY_TASK_SIZE", "4MiB",
     "Bytes per task (1 byte to 1 GiB, rounded up to 4 KiB). A request is split into tasks of this size, "
     "each one operation in the report.",
     parse_size_into<&Config::set_task_size, 1, kMaxTaskSize, kRoundedToPages>, number<&Config::task_size>},
    {"direct_io", "FERRY_DIRECT_IO", "auto",
     "O_DIRECT for the aligned body of a request: auto (for data not in the page cache, checked per "
     "task), on (whenever alignment allows), off.",
     [](Config& c, std::string_view v, const std::string& label) -> Status {
       FERRY_ASSIGN_OR_RETURN(DirectIo d, parse_choice<DirectIo>(v, label,
           {{"auto", DirectIo::automatic}, {"on", DirectIo::on}, {"off", DirectIo::off}}));
       return store<&Config::set_direct_io>(c, d);
     },
     [](const Config& c) { return std::string(direct_io_name(c.direct_io())); }},
    {"compat_mode", "FERRY_COMPAT_MODE", "auto",
     "Device reads through cuFile: on = never (Ferry's staged route), off = always (fail if cuFile "
     "cannot be used), auto = only where cuFile moves data directly (nvidia-fs or P2PDMA).",
     [](Config& c, std::string_view v, const std::string& label) -> Status {
       FERRY_ASSIGN_OR_RETURN(CompatMode m, parse_choice<CompatMode>(v, label,
           {{"auto", CompatMode::automatic}, {"on", CompatMode::on}, {"off", CompatMode::off}}));
       return store<&Config::set_compat_mode>(c, m);
     },
     [](const Config& c) { return std::string(compat_mode_name(c.compat_mode())); }},
    {"gds_threshold", "FERRY_GDS_THRESHOLD", "16KiB",
     "Device requests smaller than this take the staged route (0 to 1 TiB).",
     parse_size_into<&Config::set_gds_threshold, 0, kMaxGdsThreshold>, number<&Config::gds_threshold>},
    {"bounce_buffer_size", "FERRY_BOUNCE_BUFFER_SIZE", "4MiB",
     "Size of each pinned bounce buffer of the staged route (1 byte to 256 MiB, rounded up to 4 KiB); "
     "tasks larger than this move in pieces of this size.",
     parse_size_into<&Config::set_bounce_buffer_size, 1, kMaxBounceBufferSize, kRoundedToPages>,
     number<&Config::bounce_buffer_size>},
    {"bounce_buffers_per_thread", "FERRY_BOUNCE_BUFFERS_PER_THREAD", "2",
     "Pinned bounce buffers per worker of the staged route (2 to 64; at least 2: read one while copying "
     "another).",
     parse_count_into<&Config::set_bounce_buffers_per_thread, kMinBounceBuffers, kMaxBounceBuffers>,
     number<&Config::bounce_buffers_per_thread>},
    {"pinned_budget", "FERRY_PINNED_BUDGET", "a quarter of memory (a container's limit, where lower)",
     "The most pinned host memory Ferry's staging may hold at once, in the whole process (64 MiB to 64 TiB, "
     "rounded up to 4 KiB): bounce buffers, stream-ordered requests, save windows. Work beyond it waits for "
     "memory to come back (the report says how long); process-wide, so only the default configuration's value "
     "counts (FERRY_PINNED_BUDGET, ferry.config).",
     parse_size_into<&Config::set_pinned_budget, kMinPinnedBudget, kMaxPinnedBudget, kRoundedToPages>,
     number<&Config::pinned_budget>},
    {"require", "FERRY_REQUIRE", "none",
     "gds = fail before I/O when cuFile's direct route is impossible, and after I/O when cuFile's "
     "statistics show any operation took another way.",
     [](Config& c, std::string_view v, const std::string& label) -> Status {
       FERRY_ASSIGN_OR_RETURN(Requirement r, parse_choice<Requirement>(v, label,
           {{"none", Requirement::none}, {"", Requirement::none}, {"gds", Requirement::gds}}));
       return store<&Config::set_require>(c, r);
     },
     [](const Config& c) { return std::string(requirement_name(c.require())); }},
    {"nvtx", "FERRY_NVTX", "off",
     "on = NVTX ranges around every request and task, for Nsight Systems (nsys profile); they cost nothing "
     "unless a profiler is attached. off = none.",
     parse_flag_into<&Config::set_nvtx, false>, on_off<&Config::nvtx>},
    {"io_engine", "FERRY_IO_ENGINE", "psync",
     "How local files are read in batches (host-route tasks, pread_batch pieces, bounce-buffer fills): psync = one "
     "pread per task per worker; io_uring = each worker keeps 16 in flight through io_uring (pread where the "
     "kernel refuses io_uring).",
     [](Config& c, std::string_view v, const std::string& label) -> Status {
       FERRY_ASSIGN_OR_RETURN(IoEngine e, parse_choice<IoEngine>(v, label,
           {{"psync", IoEngine::psync}, {"", IoEngine::psync}, {"io_uring", IoEngine::io_uring}}));
       return store<&Config::set_io_engine>(c, e);
     },
     [](const Config& c) { return std::string(io_engine_name(c.io_engine())); }},
    {"remote_connections", "FERRY_REMOTE_CONNECTIONS", "8",
     "Range requests in flight per request to a remote object (1 to 256), each on its own keep-alive "
     "connection from the object's pool: a request of a remote object runs this many tasks at once, one "
     "ranged GET each (instead of threads).",
     parse_count_into<&RemoteSettings::connections, 1, kMaxConnections>, number<&RemoteSettings::connections>},
    {"remote_max_retries", "FERRY_REMOTE_MAX_RETRIES", "5",
     "Retries of a task's request after a 5xx, 408 or 429 answer, a refused or reset connection, a "
     "stall, a missed deadline or a body cut short (0 to 100); a retry asks only for the bytes missing.",
     parse_count_into<&RemoteSettings::max_retries, 0, kMaxRetries>, number<&RemoteSettings::max_retries>},
    {"remote_retry_delay_ms", "FERRY_REMOTE_RETRY_DELAY_MS", "100",
     "The first retry's wait in milliseconds (0 to 3600000); each next one waits twice as long, up to "
     "remote_retry_max_delay_ms, less a random jitter of up to half.",
     parse_count_into<&RemoteSettings::retry_delay_ms, 0, kMaxMilliseconds>,
     number<&RemoteSettings::retry_delay_ms>},
    {"remote_retry_max_delay_ms", "FERRY_REMOTE_RETRY_MAX_DELAY_MS", "5000",
     "The longest wait between retries in milliseconds (0 to 3600000).",
     parse_count_into<&RemoteSettings::retry_max_delay_ms, 0, kMaxMilliseconds>,
     number<&RemoteSettings::retry_max_delay_ms>},
    {"remote_connect_timeout_ms", "FERRY_REMOTE_CONNECT_TIMEOUT_MS", "10000",
     "How long connecting (TCP and TLS) may take, in milliseconds (1 to 3600000).",
     parse_count_into<&RemoteSettings::connect_timeout_ms, 1, kMaxMilliseconds>,
     number<&RemoteSettings::connect_timeout_ms>},
    {"remote_stall_timeout_ms", "FERRY_REMOTE_STALL_TIMEOUT_MS", "30000",
     "A request that receives no byte for this many milliseconds (1 to 3600000) is abandoned and retried "
     "for its missing bytes; checked every 50 ms.",
     parse_count_into<&RemoteSettings::stall_timeout_ms, 1, kMaxMilliseconds>,
     number<&RemoteSettings::stall_timeout_ms>},
    {"remote_min_rate", "FERRY_REMOTE_MIN_RATE", "64KiB",
     "Bytes per second a request must average (0 to 1 TiB; 0 = no deadline): a request for N bytes that "
     "has not finished after remote_stall_timeout_ms + N / remote_min_rate seconds is abandoned and "
     "retried, so a server that trickles bytes cannot hold a read for ever.",
     parse_size_into<&RemoteSettings::min_rate, 0, kMaxMinRate>, number<&RemoteSettings::min_rate>},
    {"remote_verify_tls", "FERRY_REMOTE_VERIFY_TLS", "on",
     "on = check TLS certificates and host names of https:// servers; off only for test servers.",
     parse_flag_into<&RemoteSettings::verify_tls, true>, on_off<&RemoteSettings::verify_tls>},
    {"s3_region", "FERRY_S3_REGION", "",
     "The region S3 requests are signed for; empty: AWS_REGION, AWS_DEFAULT_REGION, the profile's "
     "region, else us-east-1.",
     parse_word_into<&RemoteSettings::s3_region>, value_of<&RemoteSettings::s3_region>},
    {"s3_endpoint", "FERRY_S3_ENDPOINT", "",
     "Where S3 requests go (http://127.0.0.1:9000 for an S3-compatible store); empty: AWS_ENDPOINT_URL_S3, "
     "AWS_ENDPOINT_URL, the profile's endpoint_url, else AWS.",
     [](Config& c, std::string_view v, const std::string& label) -> Status {
       FERRY_RETURN_IF_ERROR(check_word(v, label));
       const std::string t = detail::ascii_lower(v);
       if (!t.empty() && t.rfind("http://", 0) != 0 && t.rfind("https://", 0) != 0) {
         return bad_value(label, v, "an http:// or https:// URL");
       }
       return store<&RemoteSettings::s3_endpoint>(c, std::string(v));
     },
     value_of<&RemoteSettings::s3_endpoint>},
    {"s3_profile", "FERRY_S3_PROFILE", "",
     "The profile of the ~/.aws files; empty: AWS_PROFILE, else default. A named profile must exist and "
     "hold credentials (or s3_anonymous must be on).",
     parse_word_into<&RemoteSettings::s3_profile>, value_of<&RemoteSettings::s3_profile>},
    {"s3_addressing", "FERRY_S3_ADDRESSING", "automatic",
     "How s3:// URLs become requests: path (endpoint/bucket/key), virtual_host (bucket.endpoint/key), "
     "automatic (path with an endpoint set, else virtual_host; path for bucket names with dots).",
     [](Config& c, std::string_view v, const std::string& label) -> Status {
       FERRY_ASSIGN_OR_RETURN(S3Addressing a, parse_choice<S3Addressing>(v, label,
           {{"automatic", S3Addressing::automatic}, {"", S3Addressing::automatic}, {"path", S3Addressing::path},
            {"virtual_host", S3Addressing::virtual_host}}));
       return store<&RemoteSettings::s3_addressing>(c, a);
     },
     [](const Config& c) { return std::string(s3_addressing_name(c.remote().s3_addressing)); }},
    {"s3_anonymous", "FERRY_S3_ANONYMOUS", "off",
     "on = unsigned S3 requests (public buckets) even where credentials exist.",
     parse_flag_into<&RemoteSettings::s3_anonymous, false>, on_off<&RemoteSettings::s3_anonymous>},
};

const SettingRow* find_setting(std::string_view name_or_env) {
  for (const auto& row : kSettingRows) {
    if (row.name == name_or_env || row.env == name_or_env) return &row;
  }
  return nullptr;
}

}  // namespace

const std::vector<SettingInfo>& settings_table() {
  static constinit std::atomic<std::vector<SettingInfo>*> table{nullptr};  // the first default_config() reads it
  return detail::made_once(table, [] {
    auto* t = new std::vector<SettingInfo>;
    for (const auto& row : kSettingRows) t->push_back({row.name, row.env, row.default_text, row.description});
    return t;
  });
}

Config::Config()
    : threads_(default_threads()),
      task_size_(4 * kMiB),
      direct_io_(DirectIo::automatic),
      compat_mode_(CompatMode::automatic),
      gds_threshold_(16 * 1024),
      bounce_buffer_size_(4 * kMiB),
      bounce_buffers_per_thread_(2),
      pinned_budget_(default_pinned_budget()),
      require_(Requirement::none),
      io_engine_(IoEngine::psync) {}

void Config::mark(std::string_view name, SettingSource s) {
  for (auto& [n, src] : sources_) {
    if (n == name) {
      src = s;
      return;
    }
  }
  sources_.emplace_back(std::string(name), s);
}

SettingSource Config::source(std::string_view name) const {
  for (const auto& [n, src] : sources_) {
    if (n == name) return src;
  }
  return SettingSource::default_value;
}

Config& Config::set_threads(unsigned n) {
  threads_ = std::clamp(n, kMinThreads, kMaxThreads);
  mark("threads", SettingSource::api);
  return *this;
}
Config& Config::set_task_size(std::uint64_t bytes) {
  task_size_ = page_round_clamped(bytes, kMaxTaskSize);
  mark("task_size", SettingSource::api);
  return *this;
}
Config& Config::set_direct_io(DirectIo d) {
  direct_io_ = d;
  mark("direct_io", SettingSource::api);
  return *this;
}
Config& Config::set_compat_mode(CompatMode m) {
  compat_mode_ = m;
  mark("compat_mode", SettingSource::api);
  return *this;
}
Config& Config::set_gds_threshold(std::uint64_t bytes) {
  gds_threshold_ = std::min(bytes, kMaxGdsThreshold);
  mark("gds_threshold", SettingSource::api);
  return *this;
}
Config& Config::set_bounce_buffer_size(std::uint64_t bytes) {
  bounce_buffer_size_ = page_round_clamped(bytes, kMaxBounceBufferSize);
  mark("bounce_buffer_size", SettingSource::api);
  return *this;
}
Config& Config::set_bounce_buffers_per_thread(unsigned n) {
  bounce_buffers_per_thread_ = std::clamp(n, kMinBounceBuffers, kMaxBounceBuffers);
  mark("bounce_buffers_per_thread", SettingSource::api);
  return *this;
}
Config& Config::set_pinned_budget(std::uint64_t bytes) {
  pinned_budget_ = std::clamp(page_round_clamped(bytes, kMaxPinnedBudget), kMinPinnedBudget, kMaxPinnedBudget);
  mark("pinned_budget", SettingSource::api);
  return *this;
}
Config& Config::set_nvtx(bool on) {
  nvtx_ = on;
  mark("nvtx", SettingSource::api);
  return *this;
}

Config& Config::set_io_engine(IoEngine e) {
  io_engine_ = e;
  mark("io_engine", SettingSource::api);
  return *this;
}

Config& Config::set_remote(const RemoteSettings& settings) {
  const Config before = *this;
  remote_ = settings;
  RemoteSettings& r = remote_;
  r.connections = std::clamp(r.connections, 1u, kMaxConnections);
  r.max_retries = std::min(r.max_retries, kMaxRetries);
  r.retry_delay_ms = std::min(r.retry_delay_ms, kMaxMilliseconds);
  r.retry_max_delay_ms = std::min(r.retry_max_delay_ms, kMaxMilliseconds);
  r.connect_timeout_ms = std::clamp(r.connect_timeout_ms, 1u, kMaxMilliseconds);
  r.stall_timeout_ms = std::clamp(r.stall_timeout_ms, 1u, kMaxMilliseconds);
  r.min_rate = std::min(r.min_rate, kMaxMinRate);
  // Each remote setting whose value changed now comes from the API (Config::set re-marks its own).
  for (const auto& row : kSettingRows) {
    if (row.get(before) != row.get(*this)) mark(row.name, SettingSource::api);
  }
  return *this;
}

Config& Config::set_require(Requirement r) {
  require_ = r;
  mark("require", SettingSource::api);
  return *this;
}

Status Config::set(std::string_view name_or_env, std::string_view value, SettingSource source) {
  const SettingRow* row = find_setting(name_or_env);
  if (row == nullptr) {
    return Status(ErrorCode::invalid_argument, fmt::format("unknown setting \"{}\"", name_or_env));
  }
  // Errors name the variable when the value came from the environment, the setting otherwise.
  const std::string label = source == SettingSource::environment ? row->env : row->name;
  FERRY_RETURN_IF_ERROR(row->parse(*this, value, label));
  mark(row->name, source);
  return Status();
}

std::string Config::get(std::string_view name) const {
  const SettingRow* row = find_setting(name);
  return row ? row->get(*this) : std::string();
}

Result<Config> Config::from_environment() {
  Config config;
  for (const auto& row : settings_table()) {
    const char* value = std::getenv(row.env.c_str());
    if (value == nullptr) continue;
    FERRY_RETURN_IF_ERROR(config.set(row.env, value, SettingSource::environment));
  }
  return config;
}

namespace {
std::mutex g_default_mutex;
std::optional<Config> g_default_config;
std::atomic<std::uint64_t> g_pinned_budget{0};  // g_default_config's pinned_budget; 0 until it is read
const bool g_default_mutex_forks = (detail::hold_across_fork(g_default_mutex), true);  // File::open takes it
}  // namespace

Result<Config> default_config() {
  std::lock_guard<std::mutex> lock(g_default_mutex);
  if (g_default_config) return *g_default_config;
  FERRY_ASSIGN_OR_RETURN(Config config, Config::from_environment());
  g_default_config = config;
  g_pinned_budget.store(config.pinned_budget());
  return config;
}

void set_default_config(const Config& config) {
  std::lock_guard<std::mutex> lock(g_default_mutex);
  g_default_config = config;
  g_pinned_budget.store(config.pinned_budget());
}

std::uint64_t pinned_budget_in_force() {
  if (const std::uint64_t budget = g_pinned_budget.load(); budget != 0) return budget;
  auto config = default_config();  // reads the environment once
  return config.ok() ? config->pinned_budget() : Config().pinned_budget();
}

}  // namespace ferry
