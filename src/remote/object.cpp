// remote::Object: open() (HEAD or a one-byte probe), read_range() (one range request with bounded retries),
// the connection pool and the counters. The per-request work is in http_transfer.cpp; S3 targets in
// s3_target.cpp.
#include "remote/object.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "base/ascii.hpp"
#include "remote/s3_target.hpp"
#include "remote/url.hpp"

namespace ferry::detail::remote {
namespace {

// The k-th retry's wait: base * 2^k, capped, less a random jitter of up to half of it.
std::chrono::milliseconds backoff(const RemoteSettings& s, unsigned attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  const std::uint64_t base = s.retry_delay_ms;
  std::uint64_t delay = attempt >= 32 ? s.retry_max_delay_ms : base << attempt;
  delay = std::min<std::uint64_t>(delay, s.retry_max_delay_ms);
  const std::uint64_t jitter = delay / 2 == 0 ? 0 : rng() % (delay / 2 + 1);
  return std::chrono::milliseconds(delay - jitter);
}

bool stopped(const std::atomic<bool>* stop) { return stop && stop->load(std::memory_order_acquire); }

// Sleeps `delay`, waking every 50 ms to see whether the request was stopped. Returns false when it was.
bool sleep_unless_stopped(std::chrono::milliseconds delay, const std::atomic<bool>* stop) {
  const auto until = std::chrono::steady_clock::now() + delay;
  while (!stopped(stop)) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(50)));
  }
  return false;
}

}  // namespace

Object::Pool& Object::pool() {
  return this_process_part(pool_, [](const Pool&, std::uint64_t generation) { return new Pool(generation); });
}

Result<std::unique_ptr<Connection>> Object::acquire() {
  {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    if (!p.idle.empty()) {
      auto c = std::move(p.idle.back());
      p.idle.pop_back();
      return c;
    }
  }
  return Connection::make();
}

void Object::release(std::unique_ptr<Connection> c) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.idle.push_back(std::move(c));
}

ObjectCounters Object::counters() const noexcept {
  return {requests_.load(), retries_.load(), connections_.load(), bytes_.load()};
}

Status Object::run(Connection& c, Request request, const std::string& context, Response* last) {
  for (unsigned attempt = 0;; ++attempt) {
    TransferResult r = c.perform(target_, request, settings_);
    requests_.fetch_add(1, std::memory_order_relaxed);
    connections_.fetch_add(r.new_connections, std::memory_order_relaxed);
    if (request.dst) {
      bytes_.fetch_add(r.bytes, std::memory_order_relaxed);
      request.dst += r.bytes;
      request.offset += r.bytes;
      request.length -= r.bytes;
    }
    if (last) *last = r.response;
    if (r.outcome == Outcome::done) return Status();
    const bool final = r.outcome == Outcome::fail || attempt >= settings_.max_retries;
    if (final || !sleep_unless_stopped(backoff(settings_, attempt), request.stop)) {
      if (!final) r.cause = Status(ErrorCode::cancelled, "the request was cancelled");
      std::string message = context + ": " + r.cause.message();
      if (r.outcome == Outcome::retry && final && attempt > 0) message += fmt::format(" (after {} retries)", attempt);
      return Status(r.cause.code(), message, 0, target_.shown);
    }
    retries_.fetch_add(1, std::memory_order_relaxed);
  }
}

Result<std::unique_ptr<Object>> Object::open(std::string_view url, std::string_view mode,
                                             const RemoteSettings& settings,
                                             const ferry::remote::Credentials* given) {
  const std::string shown = display_form(url);
  if (mode != "r" && mode != "rb") {
    if (mode.find_first_of("wa+") != std::string_view::npos) {
      return Status(ErrorCode::failed_precondition,
                    fmt::format("Cannot open \"{}\" in mode \"{}\": remote writes are not supported yet", shown, mode),
                    0, shown);
    }
    return Status(ErrorCode::invalid_argument, fmt::format("Cannot open \"{}\": unknown mode \"{}\"", shown, mode), 0,
                  shown);
  }
  std::unique_ptr<Object> o(new Object());
  o->settings_ = settings;
  Target& t = o->target_;
  t.shown = shown;
  const std::string scheme = scheme_of(url);
  if (scheme == "s3") {
    FERRY_ASSIGN_OR_RETURN(S3Target s3, resolve_s3(url, settings, given));
    t.request_url = s3.request_url;
    t.url = s3.url;
    t.credentials = s3.credentials;
    t.region = s3.region;
    o->note_ = s3.note;
  } else if (scheme == "http" || scheme == "https") {
    FERRY_ASSIGN_OR_RETURN(t.url, parse_http_url(url));
    t.request_url = std::string(url.substr(0, url.find('#')));
  } else {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("Cannot open \"{}\": not a remote URL (expected http://, https:// or s3://)", shown), 0,
                  shown);
  }

  FERRY_ASSIGN_OR_RETURN(auto conn, o->acquire());
  const std::string context = fmt::format("Could not open \"{}\"", shown);
  Request head;
  head.head = true;
  head.ranged = false;
  Response answer;
  Status st = o->run(*conn, head, context, &answer);
  bool size_known = false, ranges_known = false;
  if (st.ok()) {
    o->etag_.set(answer.etag);
    if (answer.has_content_length) {
      o->size_ = answer.content_length;
      size_known = true;
    }
    const std::string ar = ascii_lower(answer.accept_ranges);
    if (ar.find("bytes") != std::string::npos) {
      o->ranges_ = ranges_known = true;
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
    probe.etag = &o->etag_;
    Response pa;
    Status ps = o->run(*conn, probe, context, &pa);
    std::uint64_t first = 0, last = 0, total = 0;
    if (ps.ok() && pa.status == 206 && parse_content_range(pa.content_range, first, last, total) &&
        total != kUnknownSize) {
      o->size_ = total;
      o->ranges_ = true;
    } else if (ps.ok() && pa.status == 200 && pa.has_content_length) {
      o->size_ = pa.content_length;
      o->ranges_ = false;
    } else if (pa.status == 416 && parse_content_range(pa.content_range, first, last, total) && total != kUnknownSize) {
      o->size_ = total;  // an empty object: no byte range is satisfiable
      o->ranges_ = true;
    } else if (!ps.ok()) {
      return ps;
    } else if (size_known) {
      o->ranges_ = false;  // a 200 without a length after a HEAD with one: treat as no range support
    } else {
      return Status(ErrorCode::io_error,
                    context + ": the server gave no size (no Content-Length to HEAD, no Content-Range to a range GET)",
                    0, shown);
    }
  }
  o->release(std::move(conn));
  return o;
}

Result<std::uint64_t> Object::read_range(char* dst, std::uint64_t length, std::uint64_t offset,
                                         const std::atomic<bool>* stop) {
  length = offset >= size_ ? 0 : std::min(length, size_ - offset);
  if (length == 0) return std::uint64_t{0};
  const std::string context =
      fmt::format("Could not read {} bytes at offset {} from \"{}\"", length, offset, target_.shown);
  if (!ranges_ && offset != 0) {
    return Status(ErrorCode::failed_precondition,
                  context + ": the server does not support range requests, so only reads from offset 0 work", 0,
                  target_.shown);
  }
  FERRY_ASSIGN_OR_RETURN(auto conn, acquire());
  Request r;
  r.offset = offset;
  r.length = length;
  r.dst = dst;
  r.etag = &etag_;
  r.expect_total = size_;
  r.stop = stop;
  Status st = run(*conn, r, context);
  release(std::move(conn));
  FERRY_RETURN_IF_ERROR(st);
  return length;
}

}  // namespace ferry::detail::remote
