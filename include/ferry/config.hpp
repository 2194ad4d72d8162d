// ferry/config.hpp: Ferry's settings, from defaults, FERRY_* environment variables and code.
//
// Every setting is three things at once: an environment variable, a setter here, and a row of the
// settings table in docs/settings.md (settings_table() below is the source of that table).
// Thread safety: Config is a value. default_config()/set_default_config() may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/status.hpp"

namespace ferry {

/// Whether Ferry hands device reads to cuFile. `on`: never (Ferry's staged route); `off`: always, and
/// fail clearly when cuFile cannot be used; `automatic` ("auto"): cuFile only where it would move data
/// directly (nvidia-fs or P2PDMA present and the handle registered), otherwise the staged route.
enum class CompatMode { automatic, on, off };

/// O_DIRECT use for the aligned body of a request. `automatic`: O_DIRECT for data that is not in the
/// page cache, buffered reads for data that is (checked per task); `on`: O_DIRECT whenever alignment
/// allows; `off`: never.
enum class DirectIo { automatic, on, off };

/// How local files are read on the host route: `psync`, one pread per task per worker thread; `io_uring`,
/// each worker keeps a batch of tasks in flight through io_uring (where the kernel allows it).
enum class IoEngine { psync, io_uring };

/// What a caller insists on. `gds`: fail before I/O when cuFile's direct route is impossible, and after
/// I/O when cuFile's statistics show an operation went another way.
enum class Requirement { none, gds };

const char* compat_mode_name(CompatMode m) noexcept;  // "auto", "on", "off"
const char* direct_io_name(DirectIo d) noexcept;      // "auto", "on", "off"
const char* requirement_name(Requirement r) noexcept; // "none", "gds"
const char* io_engine_name(IoEngine e) noexcept;      // "psync", "io_uring"

/// How an `s3://bucket/key` URL becomes an HTTP request: `path` (`endpoint/bucket/key`), `virtual_host`
/// (`bucket.endpoint/key`), or `automatic`: path style when an endpoint is set (local S3-compatible stores
/// rarely resolve bucket host names), else virtual-host style (path style for bucket names with dots,
/// which the certificates of `*.s3.<region>.amazonaws.com` do not cover).
enum class S3Addressing { automatic, path, virtual_host };
const char* s3_addressing_name(S3Addressing a) noexcept;  // "automatic", "path", "virtual_host"

/// The settings of remote objects (`http(s)://` and `s3://` URLs, docs/remote.md), one row each in the
/// settings table. Credentials are not settings: they come from the environment, the ~/.aws files or
/// ferry::remote::open(), so that no report, settings listing or `ferry doctor` can print one.
struct RemoteSettings {
  unsigned connections = 8;                  // remote_connections: range requests in flight per request
  unsigned max_retries = 5;                  // remote_max_retries: retries of one task's request
  std::uint32_t retry_delay_ms = 100;        // remote_retry_delay_ms: the first backoff (doubles each time)
  std::uint32_t retry_max_delay_ms = 5000;   // remote_retry_max_delay_ms: the backoff's cap
  std::uint32_t connect_timeout_ms = 10000;  // remote_connect_timeout_ms
  std::uint32_t stall_timeout_ms = 30000;    // remote_stall_timeout_ms: no byte for this long ends a request
  std::uint64_t min_rate = 64 << 10;         // remote_min_rate (bytes/s): a request's deadline; 0 = none
  bool verify_tls = true;                    // remote_verify_tls
  std::string s3_region;                     // empty: AWS_REGION, AWS_DEFAULT_REGION, the profile, us-east-1
  std::string s3_endpoint;                   // empty: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile, AWS
  std::string s3_profile;                    // empty: AWS_PROFILE, else "default"
  S3Addressing s3_addressing = S3Addressing::automatic;
  bool s3_anonymous = false;                 // unsigned requests even where credentials exist
  bool operator==(const RemoteSettings&) const = default;
};

/// Where a setting's value came from, for reports and `ferry doctor`.
enum class SettingSource { default_value, environment, api };
const char* setting_source_name(SettingSource s) noexcept;

/// Parses a byte size: plain bytes ("4096"), binary suffixes ("4KiB", "16k", "4MiB", "1G") and decimal
/// ones ("1KB" = 1000, "1GB" = 10^9). Suffixes are case-insensitive; "k/m/g/t" alone are binary.
/// Errors: invalid_argument naming `setting` and the text, for anything else (negative, fractional,
/// unknown suffix, overflow).
[[nodiscard]] Result<std::uint64_t> parse_size(std::string_view text, std::string_view setting);

/// "1.00 GiB", "4.00 MiB", "512 B".
std::string format_size(std::uint64_t bytes);

/// One row of the settings table.
struct SettingInfo {
  std::string name;         // "task_size"
  std::string env;          // "FERRY_TASK_SIZE"
  std::string default_text; // "4MiB"
  std::string description;
};

/// All settings, in documentation order.
const std::vector<SettingInfo>& settings_table();

class Config {
 public:
  /// Built-in defaults only (no environment).
  Config();

  /// Defaults overridden by FERRY_* environment variables. Errors: invalid_argument naming the variable
  /// and the text it could not parse.
  [[nodiscard]] static Result<Config> from_environment();

  /// Sets a setting by its name ("task_size") or variable ("FERRY_TASK_SIZE") from text, as the
  /// environment would. Errors: invalid_argument for an unknown name, a value that does not parse, or a
  /// number outside the setting's bounds (docs/settings.md), naming the setting, the value and the bounds.
  /// The typed setters below never fail: they clamp to the same bounds.
  Status set(std::string_view name, std::string_view value, SettingSource source = SettingSource::api);
  /// The value of a setting as text ("4MiB" style sizes are shown in bytes); empty for unknown names.
  std::string get(std::string_view name) const;
  SettingSource source(std::string_view name) const;

  // Each setting's bounds and default: docs/settings.md.
  // Worker threads one request may use.
  unsigned threads() const { return threads_; }
  Config& set_threads(unsigned n);
  // Bytes per task: one request is split into tasks of this size.
  std::uint64_t task_size() const { return task_size_; }
  Config& set_task_size(std::uint64_t bytes);
  DirectIo direct_io() const { return direct_io_; }
  Config& set_direct_io(DirectIo d);
  CompatMode compat_mode() const { return compat_mode_; }
  Config& set_compat_mode(CompatMode m);
  // Device requests smaller than this take the staged route.
  std::uint64_t gds_threshold() const { return gds_threshold_; }
  Config& set_gds_threshold(std::uint64_t bytes);
  // Size of one pinned bounce buffer of the staged route.
  std::uint64_t bounce_buffer_size() const { return bounce_buffer_size_; }
  Config& set_bounce_buffer_size(std::uint64_t bytes);
  // Pinned bounce buffers per worker (at least 2, so that reading and copying overlap).
  unsigned bounce_buffers_per_thread() const { return bounce_buffers_per_thread_; }
  Config& set_bounce_buffers_per_thread(unsigned n);
  // The most pinned host memory the process's staging holds at once. Process-wide: only the default
  // configuration's value counts (pinned_budget_in_force()); a File's own Config does not change it.
  std::uint64_t pinned_budget() const { return pinned_budget_; }
  Config& set_pinned_budget(std::uint64_t bytes);
  Requirement require() const { return require_; }
  Config& set_require(Requirement r);
  // How the host route reads local files (psync or io_uring).
  IoEngine io_engine() const { return io_engine_; }
  Config& set_io_engine(IoEngine e);
  // NVTX ranges (for Nsight Systems) around each request and task of Files opened with this config, when
  // a tool is attached.
  bool nvtx() const { return nvtx_; }
  Config& set_nvtx(bool on);
  // Remote objects: the remote_* and s3_* settings (RemoteSettings above).
  // set_remote clamps numbers to their bounds and marks the settings it changed as set by the API.
  const RemoteSettings& remote() const { return remote_; }
  Config& set_remote(const RemoteSettings& settings);

 private:
  void mark(std::string_view name, SettingSource s);
  unsigned threads_;
  std::uint64_t task_size_;
  DirectIo direct_io_;
  CompatMode compat_mode_;
  std::uint64_t gds_threshold_;
  std::uint64_t bounce_buffer_size_;
  unsigned bounce_buffers_per_thread_;
  std::uint64_t pinned_budget_;
  Requirement require_;
  IoEngine io_engine_;
  bool nvtx_ = false;
  RemoteSettings remote_;
  std::vector<std::pair<std::string, SettingSource>> sources_;
};

/// The configuration File::open uses when given none: from_environment() on first use, unless
/// set_default_config() replaced it. Errors: the environment's parse error.
[[nodiscard]] Result<Config> default_config();
void set_default_config(const Config& config);
/// The pinned budget the process's staging keeps to: the default configuration's pinned_budget (its
/// environment's on first use, if it cannot be read: the built-in default).
std::uint64_t pinned_budget_in_force();

/// The pinned staging memory of this process (bounce buffers, stream-ordered slots, save windows) against
/// its budget.
struct PinnedMemoryUse {
  std::uint64_t budget = 0;        // pinned_budget_in_force()
  std::uint64_t pinned_bytes = 0;  // held now, idle or in use
  std::uint64_t peak_bytes = 0;    // the most held at once, since the process started
  std::uint64_t waits = 0;         // times work waited for room in the budget
  double waited_seconds = 0;       // how long callers waited in all (a pool worker's wait is not on a caller:
                                   // its requests' reports carry it)
};
PinnedMemoryUse pinned_memory_use();

}  // namespace ferry
