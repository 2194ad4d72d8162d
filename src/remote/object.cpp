// ferry::remote::Object: open() (HEAD or a one-byte probe), read() (parts over parallel connections with
// bounded retries), counters. The per-request work is in http_transfer.cpp; S3 targets in s3_target.cpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>
#include <vector>

#include "ferry/remote.hpp"
#include "remote/http_transfer.hpp"
#include "remote/s3_target.hpp"
#include "remote/url.hpp"

namespace ferry::remote {
namespace detail {

using namespace ferry::detail::remote;

struct ObjectState {
  Options options;
  Target target;
  std::string request_shown;
  std::uint64_t size = 0;
  std::string etag;
  bool ranges = false;

  std::mutex pool_mutex;
  std::vector<std::unique_ptr<Connection>> pool;

  std::atomic<std::uint64_t> bytes{0}, requests{0}, retries{0}, connections{0}, read_calls{0}, read_ns{0};

  Result<std::unique_ptr<Connection>> acquire() {
    {
      std::lock_guard<std::mutex> lock(pool_mutex);
      if (!pool.empty()) {
        auto c = std::move(pool.back());
        pool.pop_back();
        return c;
      }
    }
    return Connection::make();
  }
  void release(std::unique_ptr<Connection> c) {
    std::lock_guard<std::mutex> lock(pool_mutex);
    pool.push_back(std::move(c));
  }

  std::chrono::milliseconds backoff(unsigned attempt) {
    thread_local std::minstd_rand rng(std::random_device{}());
    const std::uint64_t base = options.retry_base_delay_ms;
    std::uint64_t delay = attempt >= 32 ? options.retry_max_delay_ms : base << attempt;
    delay = std::min<std::uint64_t>(delay, options.retry_max_delay_ms);
    const std::uint64_t jitter = delay / 2 == 0 ? 0 : rng() % (delay / 2 + 1);
    return std::chrono::milliseconds(delay - jitter);
  }

  // Runs `request` until it is done, failed for good, or out of retries. A retry asks only for the bytes
  // still missing, so each byte of dst is written at most once. `last` receives the final answer.
  Status run(Connection& c, Request request, const std::string& context, Response* last = nullptr) {
    for (unsigned attempt = 0;; ++attempt) {
      TransferResult r = c.perform(target, request, options);
      requests.fetch_add(1, std::memory_order_relaxed);
      connections.fetch_add(r.new_connections, std::memory_order_relaxed);
      if (request.dst) {
        bytes.fetch_add(r.bytes, std::memory_order_relaxed);
        request.dst += r.bytes;
        request.offset += r.bytes;
        request.length -= r.bytes;
      }
      if (last) *last = r.response;
      if (r.outcome == Outcome::done) return Status();
      if (r.outcome == Outcome::fail || attempt >= options.max_retries) {
        std::string message = context + ": " + r.cause.message();
        if (r.outcome == Outcome::retry && attempt > 0) message += " (after " + std::to_string(attempt) + " retries)";
        return Status(r.cause.code(), message, 0, target.shown);
      }
      retries.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::sleep_for(backoff(attempt));
    }
  }
};

}  // namespace detail

namespace {

using namespace ferry::detail::remote;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

Status check_options(const Options& o) {
  auto bad = [](const std::string& why) { return Status(ErrorCode::invalid_argument, "Invalid remote option: " + why); };
  if (o.connections < 1 || o.connections > 256) return bad("connections must be 1-256, not " + std::to_string(o.connections));
  if (o.part_size_bytes < (64u << 10)) {
    return bad("part_size_bytes must be at least 65536, not " + std::to_string(o.part_size_bytes));
  }
  if (o.max_retries > 100) return bad("max_retries must be 0-100, not " + std::to_string(o.max_retries));
  if (o.retry_max_delay_ms < o.retry_base_delay_ms) return bad("retry_max_delay_ms is below retry_base_delay_ms");
  return Status();
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

const char* addressing_name(Addressing addressing) noexcept {
  switch (addressing) {
    case Addressing::automatic: return "automatic";
    case Addressing::path: return "path";
    case Addressing::virtual_host: return "virtual_host";
  }
  return "automatic";
}

bool is_remote_url(std::string_view path) noexcept {
  try {
    const std::string s = scheme_of(path);
    return s == "http" || s == "https" || s == "s3";
  } catch (...) {
    return false;
  }
}

std::string display_url(std::string_view url) { return display_form(url); }

std::string unavailable_reason() { return {}; }

Result<Options> Options::from_environment() {
  Options o;
  auto number = [](const char* name, std::uint64_t& out, bool sizes) -> Status {
    const char* raw = std::getenv(name);
    if (!raw || !*raw) return Status();
    std::string_view text(raw);
    std::uint64_t mult = 1;
    if (sizes && !text.empty()) {
      const char last = static_cast<char>(text.back() | 0x20);
      if (last == 'k') mult = 1ull << 10;
      if (last == 'm') mult = 1ull << 20;
      if (last == 'g') mult = 1ull << 30;
      if (mult != 1) text.remove_suffix(1);
    }
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v > (~0ull) / mult) {
      return Status(ErrorCode::invalid_argument,
                    std::string("Invalid ") + name + "=\"" + raw + "\": expected a whole number" +
                        (sizes ? " (optionally with K, M or G)" : ""));
    }
    out = v * mult;
    return Status();
  };
  auto small = [&](const char* name, auto& field, std::uint64_t max) -> Status {
    std::uint64_t v = field;
    FERRY_RETURN_IF_ERROR(number(name, v, false));
    if (v > max) {
      return Status(ErrorCode::invalid_argument, std::string("Invalid ") + name + "=" + std::to_string(v) +
                                                     ": at most " + std::to_string(max));
    }
    field = static_cast<std::remove_reference_t<decltype(field)>>(v);
    return Status();
  };
  FERRY_RETURN_IF_ERROR(small("FERRY_REMOTE_CONNECTIONS", o.connections, 256));
  FERRY_RETURN_IF_ERROR(number("FERRY_REMOTE_PART_SIZE", o.part_size_bytes, true));
  FERRY_RETURN_IF_ERROR(small("FERRY_REMOTE_MAX_RETRIES", o.max_retries, 100));
  FERRY_RETURN_IF_ERROR(small("FERRY_REMOTE_RETRY_DELAY_MS", o.retry_base_delay_ms, 3600000));
  FERRY_RETURN_IF_ERROR(small("FERRY_REMOTE_RETRY_MAX_DELAY_MS", o.retry_max_delay_ms, 3600000));
  FERRY_RETURN_IF_ERROR(small("FERRY_REMOTE_CONNECT_TIMEOUT_MS", o.connect_timeout_ms, 3600000));
  FERRY_RETURN_IF_ERROR(small("FERRY_REMOTE_STALL_TIMEOUT_MS", o.stall_timeout_ms, 3600000));
  auto flag = [](const char* name, bool& out) -> Status {
    const char* raw = std::getenv(name);
    if (!raw || !*raw) return Status();
    const std::string v = lower(raw);
    if (v == "1" || v == "true" || v == "on" || v == "yes") {
      out = true;
    } else if (v == "0" || v == "false" || v == "off" || v == "no") {
      out = false;
    } else {
      return Status(ErrorCode::invalid_argument, std::string("Invalid ") + name + "=\"" + raw + "\": expected 1 or 0");
    }
    return Status();
  };
  FERRY_RETURN_IF_ERROR(flag("FERRY_REMOTE_VERIFY_TLS", o.verify_tls));
  FERRY_RETURN_IF_ERROR(flag("FERRY_S3_ANONYMOUS", o.anonymous));
  if (const char* raw = std::getenv("FERRY_S3_ADDRESSING"); raw && *raw) {
    const std::string v = lower(raw);
    if (v == "automatic" || v == "auto") {
      o.addressing = Addressing::automatic;
    } else if (v == "path") {
      o.addressing = Addressing::path;
    } else if (v == "virtual_host" || v == "virtual") {
      o.addressing = Addressing::virtual_host;
    } else {
      return Status(ErrorCode::invalid_argument,
                    std::string("Invalid FERRY_S3_ADDRESSING=\"") + raw + "\": expected automatic, path or virtual_host");
    }
  }
  FERRY_RETURN_IF_ERROR(check_options(o));
  return o;
}

Object::Object(std::unique_ptr<detail::ObjectState> state) : state_(std::move(state)) {}
Object::Object(Object&&) noexcept = default;
Object& Object::operator=(Object&&) noexcept = default;
Object::~Object() = default;

std::uint64_t Object::size() const noexcept { return state_->size; }
const std::string& Object::etag() const noexcept { return state_->etag; }
bool Object::ranges_supported() const noexcept { return state_->ranges; }
const std::string& Object::url() const noexcept { return state_->target.shown; }
const std::string& Object::request_url() const noexcept { return state_->request_shown; }
const Options& Object::options() const noexcept { return state_->options; }

Counters Object::counters() const noexcept {
  const auto& s = *state_;
  Counters c;
  c.bytes = s.bytes.load();
  c.requests = s.requests.load();
  c.retries = s.retries.load();
  c.connections = s.connections.load();
  c.read_calls = s.read_calls.load();
  c.read_nanoseconds = s.read_ns.load();
  return c;
}

Result<Object> Object::open(std::string_view url, const Options& options, std::string_view mode) {
  const std::string shown = display_form(url);
  if (mode != "r" && mode != "rb") {
    const bool write_mode = mode.find_first_of("wa+") != std::string_view::npos;
    if (write_mode) {
      return Status(ErrorCode::failed_precondition,
                    "Cannot open \"" + shown + "\" in mode \"" + std::string(mode) + "\": remote writes are not supported yet",
                    0, shown);
    }
    return Status(ErrorCode::invalid_argument, "Cannot open \"" + shown + "\": unknown mode \"" + std::string(mode) + "\"",
                  0, shown);
  }
  FERRY_RETURN_IF_ERROR(check_options(options));
  auto state = std::make_unique<detail::ObjectState>();
  state->options = options;
  Target& t = state->target;
  t.shown = shown;
  const std::string scheme = scheme_of(url);
  if (scheme == "s3") {
    FERRY_ASSIGN_OR_RETURN(S3Target s3, resolve_s3(url, options));
    t.s3 = true;
    t.request_url = s3.request_url;
    t.url = s3.url;
    t.credentials = s3.credentials;
    t.region = s3.region;
  } else if (scheme == "http" || scheme == "https") {
    FERRY_ASSIGN_OR_RETURN(t.url, parse_http_url(url));
    t.request_url = std::string(url.substr(0, url.find('#')));
  } else {
    return Status(ErrorCode::invalid_argument,
                  "Cannot open \"" + shown + "\": not a remote URL (expected http://, https:// or s3://)", 0, shown);
  }
  state->request_shown = display_form(t.request_url);

  FERRY_ASSIGN_OR_RETURN(auto conn, state->acquire());
  const std::string context = "Could not open " + quoted(shown);
  Request head;
  head.head = true;
  head.ranged = false;
  Response answer;
  Status st = state->run(*conn, head, context, &answer);
  bool size_known = false, ranges_known = false;
  if (st.ok()) {
    state->etag = answer.etag;
    if (answer.has_content_length) {
      state->size = answer.content_length;
      size_known = true;
    }
    const std::string ar = lower(answer.accept_ranges);
    if (ar.find("bytes") != std::string::npos) {
      state->ranges = ranges_known = true;
    } else if (ar == "none") {
      ranges_known = true;
    }
  } else {
    // Some servers refuse HEAD (405, 501), and a URL presigned for GET answers HEAD with 403: ask with
    // a one-byte GET instead. Other failures (404, connection refused after the retries) are final.
    const long s = answer.status;
    if (!(s == 400 || s == 403 || s == 405 || s == 501)) return st;
  }
  if (!size_known || !ranges_known) {
    Request probe;
    probe.offset = 0;
    probe.length = 1;
    Response pa;
    Status ps = state->run(*conn, probe, context, &pa);
    std::uint64_t first = 0, last = 0, total = 0;
    if (ps.ok() && pa.status == 206 && parse_content_range(pa.content_range, first, last, total) &&
        total != kUnknownSize) {
      state->size = total;
      state->ranges = true;
    } else if (ps.ok() && pa.status == 200 && pa.has_content_length) {
      state->size = pa.content_length;
      state->ranges = false;
    } else if (pa.status == 416 && parse_content_range(pa.content_range, first, last, total) && total != kUnknownSize) {
      state->size = total;  // an empty object: no byte range is satisfiable
      state->ranges = true;
    } else if (!ps.ok()) {
      return ps;
    } else if (size_known) {
      state->ranges = false;  // a 200 without a length after a HEAD with one: treat as no range support
    } else {
      return Status(ErrorCode::io_error,
                    context + ": the server gave no size (no Content-Length to HEAD, no Content-Range to a range GET)",
                    0, shown);
    }
    if (state->etag.empty()) state->etag = pa.etag;
  }
  state->release(std::move(conn));
  return Object(std::move(state));
}

Result<std::uint64_t> Object::read(void* host_dst, std::uint64_t size, std::uint64_t offset) {
  auto& s = *state_;
  const std::string& shown = s.target.shown;
  if (offset > s.size) {
    return Status(ErrorCode::out_of_range,
                  "Could not read " + std::to_string(size) + " bytes at offset " + std::to_string(offset) + " from " +
                      quoted(shown) + ": the offset is past the end of the object (" + std::to_string(s.size) + " bytes)",
                  0, shown);
  }
  const std::uint64_t length = std::min(size, s.size - offset);
  if (length == 0) return std::uint64_t{0};
  if (host_dst == nullptr) return Status(ErrorCode::invalid_argument, "read into a null buffer", 0, shown);
  if (!s.ranges && offset != 0) {
    return Status(ErrorCode::failed_precondition,
                  "Could not read " + std::to_string(length) + " bytes at offset " + std::to_string(offset) + " from " +
                      quoted(shown) + ": the server does not support range requests, so only reads from offset 0 work",
                  0, shown);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t part = s.ranges ? s.options.part_size_bytes : length;
  const std::uint64_t parts = (length + part - 1) / part;
  const unsigned workers = static_cast<unsigned>(std::min<std::uint64_t>(s.options.connections, parts));
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  Status first_error;
  char* base = static_cast<char*>(host_dst);

  auto work = [&] {
    auto conn = s.acquire();
    if (!conn.ok()) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (first_error.ok()) first_error = conn.status();
      stop = true;
      return;
    }
    while (!stop.load(std::memory_order_relaxed)) {
      const std::uint64_t i = next.fetch_add(1);
      if (i >= parts) break;
      Request r;
      r.offset = offset + i * part;
      r.length = std::min(part, offset + length - r.offset);
      r.dst = base + (r.offset - offset);
      r.if_match = s.etag;
      r.expect_total = s.size;
      const std::string context = "Could not read " + std::to_string(r.length) + " bytes at offset " +
                                  std::to_string(r.offset) + " from " + quoted(shown);
      Status st = s.run(**conn, r, context);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (first_error.ok()) first_error = st;
        stop = true;
      }
    }
    s.release(std::move(conn).value());
  };
  std::vector<std::thread> threads;
  threads.reserve(workers > 0 ? workers - 1 : 0);
  for (unsigned w = 1; w < workers; ++w) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had: the parts are shared among those running
    }
  }
  work();
  for (auto& t : threads) t.join();
  if (!first_error.ok()) return first_error;
  s.read_calls.fetch_add(1);
  s.read_ns.fetch_add(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()));
  return length;
}

Result<std::uint64_t> read(std::string_view url, void* host_dst, std::uint64_t size, std::uint64_t offset,
                           const Options& options, Counters* counters) {
  FERRY_ASSIGN_OR_RETURN(Object object, Object::open(url, options));
  auto got = object.read(host_dst, size, offset);
  if (counters) *counters = object.counters();
  return got;
}

}  // namespace ferry::remote
