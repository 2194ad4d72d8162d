#include "remote/http_transfer.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>

#include <curl/curl.h>
#include <fmt/format.h>

namespace ferry::detail::remote {
namespace {

constexpr std::size_t kErrorBodyLimit = 4096;
// How often a transfer wakes to check its stop flag, stall timeout and deadline (the transfer callback).
constexpr long kTickMs = 50;

using Clock = std::chrono::steady_clock;

bool iequals_prefix(const std::string& line, const char* name, std::string& value) {
  const std::size_t n = std::strlen(name);
  if (line.size() <= n || line[n] != ':') return false;
  for (std::size_t i = 0; i < n; ++i) {
    char c = line[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != name[i]) return false;
  }
  const auto b = line.find_first_not_of(" \t", n + 1);
  const auto e = line.find_last_not_of(" \t\r\n");
  value = b == std::string::npos || e < b ? std::string() : line.substr(b, e - b + 1);
  return true;
}

bool parse_u64(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string strip_weak(const std::string& etag) { return etag.rfind("W/", 0) == 0 ? etag.substr(2) : etag; }

// Why the transfer callback ended a transfer.
enum class Abort { none, stopped, stalled, too_slow };

std::string range_text(std::uint64_t first, std::uint64_t last) {
  return "bytes " + std::to_string(first) + "-" + std::to_string(last);
}

// What the callbacks share during one transfer.
struct Sink {
  const Request* request;
  Response response;
  bool checked = false;     // the answer's headers were checked (at its first body byte)
  bool to_dst = false;      // body bytes go to request->dst
  bool whole_body = false;  // a 200 to a range request from offset 0: take `length` bytes, then stop
  bool stopped = false;     // we ended the transfer on purpose
  std::uint64_t written = 0;
  Status fatal;             // set by a callback: the answer is wrong and a retry would not help
  // The transfer callback's watch: no byte for `stall`, or not done by `deadline`, ends the transfer.
  Clock::time_point started, last_byte, deadline = Clock::time_point::max();
  Clock::duration stall{};
  std::uint64_t bytes_seen = 0;  // body bytes received (error bodies too): progress for the stall check
  std::uint64_t bytes_at_last_byte = 0;
  Abort abort = Abort::none;
};

Status changed(const std::string& why) {
  return Status(ErrorCode::failed_precondition, "object changed during the read (" + why + ")");
}

// Decides what to do with a 2xx GET answer before its body is used. Sets sink.fatal when it is wrong.
void check_answer(Sink& s) {
  s.checked = true;
  const Request& r = *s.request;
  const Response& a = s.response;
  if (a.status < 200 || a.status > 299) return;
  if (r.etag && !a.etag.empty()) {
    if (auto was = r.etag->mismatch(a.etag)) {
      s.fatal = changed("its ETag is now " + printable(a.etag) + ", was " + printable(*was));
      return;
    }
  }
  const std::uint64_t last = r.offset + r.length - 1;
  if (a.status == 206) {
    std::uint64_t first = 0, end = 0, total = 0;
    if (a.content_range.empty()) {
      s.fatal = Status(ErrorCode::io_error, "the server answered 206 without a Content-Range for " +
                                                range_text(r.offset, last));
      return;
    }
    if (!parse_content_range(a.content_range, first, end, total) || first != r.offset || end != last) {
      s.fatal = Status(ErrorCode::io_error, "the server answered with Content-Range \"" + a.content_range +
                                                "\" to a request for " + range_text(r.offset, last));
      return;
    }
    if (total != kUnknownSize && r.expect_total != kUnknownSize && total != r.expect_total) {
      s.fatal = changed("its size is now " + std::to_string(total) + " bytes, was " + std::to_string(r.expect_total));
      return;
    }
    if (a.has_content_length && a.content_length != r.length) {
      s.fatal = Status(ErrorCode::io_error, "the server's Content-Length " + std::to_string(a.content_length) +
                                                " does not match its Content-Range \"" + a.content_range + "\"");
      return;
    }
  } else if (a.status == 200 && r.ranged && r.dst) {
    if (r.offset != 0) {
      s.fatal = Status(ErrorCode::failed_precondition,
                       "the server ignored the Range header (it answered 200 with the whole object) for a read at "
                       "offset " + std::to_string(r.offset) + "; without range support only reads from offset 0 work");
      return;
    }
    if (a.has_content_length && r.expect_total != kUnknownSize && a.content_length != r.expect_total) {
      s.fatal = changed("its size is now " + std::to_string(a.content_length) + " bytes, was " +
                        std::to_string(r.expect_total));
      return;
    }
    s.whole_body = true;
  }
  s.to_dst = r.dst != nullptr;
}

size_t on_header(char* buffer, size_t size, size_t nitems, void* user) {
  auto& s = *static_cast<Sink*>(user);
  const size_t n = size * nitems;
  std::string line(buffer, n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new answer (after a redirect or 100 Continue): start over
    s.response = Response{};
    s.checked = false;
    const auto sp = line.find(' ');
    if (sp != std::string::npos) {
      s.response.status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
      const auto sp2 = line.find(' ', sp + 1);
      if (sp2 != std::string::npos) {
        const auto e = line.find_last_not_of(" \r\n");
        if (e != std::string::npos && e > sp2) s.response.reason = line.substr(sp2 + 1, e - sp2);
      }
    }
    return n;
  }
  std::string value;
  Response& a = s.response;
  if (iequals_prefix(line, "etag", value)) {
    a.etag = value;
  } else if (iequals_prefix(line, "content-range", value)) {
    a.content_range = value;
  } else if (iequals_prefix(line, "accept-ranges", value)) {
    a.accept_ranges = value;
  } else if (iequals_prefix(line, "content-length", value)) {
    a.has_content_length = parse_u64(value, a.content_length);
  }
  return n;
}

size_t on_body(char* data, size_t size, size_t nmemb, void* user) {
  auto& s = *static_cast<Sink*>(user);
  const size_t n = size * nmemb;
  s.bytes_seen += n;
  if (s.response.status < 200 || s.response.status > 299) {
    const size_t room = kErrorBodyLimit - std::min(kErrorBodyLimit, s.response.error_body.size());
    s.response.error_body.append(data, std::min(room, n));
    return n;
  }
  if (!s.checked) check_answer(s);
  if (!s.fatal.ok()) return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  if (!s.to_dst) {              // a probe: the headers were all it wanted
    s.stopped = true;
    return 0;
  }
  const Request& r = *s.request;
  const std::uint64_t room = r.length - s.written;
  if (n <= room) {
    std::memcpy(r.dst + s.written, data, n);
    s.written += n;
    const Response& a = s.response;
    if (s.whole_body && s.written == r.length && !(a.has_content_length && a.content_length == r.length)) {
      s.stopped = true;  // all the bytes wanted: stop rather than download the rest of the object
      return 0;
    }
    return n;
  }
  if (s.whole_body) {
    std::memcpy(r.dst + s.written, data, room);
    s.written += room;
    s.stopped = true;
    return 0;
  }
  s.fatal = Status(ErrorCode::io_error, "the server sent more than the " + std::to_string(r.length) +
                                            " bytes of " + range_text(r.offset, r.offset + r.length - 1));
  return 0;
}

// The transfer callback: libcurl calls it while the transfer runs, at least every kTickMs (perform()'s
// poll wakes that often). Returning non-zero ends the transfer (CURLE_ABORTED_BY_CALLBACK).
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto& s = *static_cast<Sink*>(user);
  if (s.abort != Abort::none) return 1;
  const auto now = Clock::now();
  if (s.bytes_seen != s.bytes_at_last_byte) {
    s.bytes_at_last_byte = s.bytes_seen;
    s.last_byte = now;
  }
  if (s.request->stop && s.request->stop->load(std::memory_order_acquire)) {
    s.abort = Abort::stopped;
  } else if (now >= s.deadline) {
    s.abort = Abort::too_slow;
  } else if (now - s.last_byte >= s.stall) {
    s.abort = Abort::stalled;
  }
  return s.abort == Abort::none ? 0 : 1;
}

bool retryable_curl_code(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_QUIC_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

bool parse_content_range(const std::string& text, std::uint64_t& first, std::uint64_t& last, std::uint64_t& total) {
  std::string_view t(text);
  if (t.rfind("bytes ", 0) != 0) return false;
  t.remove_prefix(6);
  const auto slash = t.find('/');
  if (slash == std::string_view::npos) return false;
  const std::string_view range = t.substr(0, slash), size = t.substr(slash + 1);
  if (size == "*") {
    total = kUnknownSize;
  } else if (!parse_u64(size, total)) {
    return false;
  }
  if (range == "*") {
    first = last = kUnknownSize;
    return total != kUnknownSize;
  }
  const auto dash = range.find('-');
  if (dash == std::string_view::npos) return false;
  if (!parse_u64(range.substr(0, dash), first) || !parse_u64(range.substr(dash + 1), last)) return false;
  return first <= last && (total == kUnknownSize || last < total);
}

std::string s3_error_text(const std::string& body) {
  auto element = [&](const char* name) -> std::string {
    const std::string open = std::string("<") + name + ">", close = std::string("</") + name + ">";
    const auto b = body.find(open);
    if (b == std::string::npos) return {};
    const auto e = body.find(close, b);
    return e == std::string::npos ? std::string() : body.substr(b + open.size(), e - b - open.size());
  };
  const std::string code = element("Code"), message = element("Message");
  if (code.empty()) return {};
  return message.empty() ? code : code + ": " + message;
}

void EtagGuard::set(std::string etag) {
  std::lock_guard<std::mutex> lock(mutex_);
  etag_ = std::move(etag);
}

std::string EtagGuard::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return etag_;
}

std::optional<std::string> EtagGuard::mismatch(const std::string& seen) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (etag_.empty()) {
    etag_ = seen;  // HEAD said nothing: the first answer names the version every other must match
    return std::nullopt;
  }
  if (strip_weak(seen) == strip_weak(etag_)) return std::nullopt;
  return etag_;
}

bool is_strong_etag(const std::string& etag) { return !etag.empty() && etag.rfind("W/", 0) != 0; }

std::string printable(std::string_view server_text) {
  std::string out;
  out.reserve(server_text.size());
  for (unsigned char c : server_text) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

Result<std::unique_ptr<Connection>> Connection::make() {
  global_init();
  CURLM* multi = curl_multi_init();
  CURL* easy = multi ? curl_easy_init() : nullptr;
  if (!easy) {
    if (multi) curl_multi_cleanup(multi);
    return Status(ErrorCode::internal, "curl_easy_init or curl_multi_init failed");
  }
  return std::unique_ptr<Connection>(new Connection(multi, easy));
}

Connection::~Connection() {
  curl_easy_cleanup(static_cast<CURL*>(easy_));
  curl_multi_cleanup(static_cast<CURLM*>(multi_));
}

TransferResult Connection::perform(const Target& target, const Request& request, const RemoteSettings& settings) {
  CURL* easy = static_cast<CURL*>(easy_);
  CURLM* multi = static_cast<CURLM*>(multi_);
  curl_easy_reset(easy);  // options only: the multi handle's connection cache (keep-alive) survives
  Sink sink;
  sink.request = &request;
  sink.started = sink.last_byte = Clock::now();
  sink.stall = std::chrono::milliseconds(settings.stall_timeout_ms);
  if (settings.min_rate > 0) {
    const double seconds = static_cast<double>(settings.stall_timeout_ms) / 1000.0 +
                           static_cast<double>(request.length) / static_cast<double>(settings.min_rate);
    sink.deadline = sink.started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  TransferResult result;

  std::vector<Header> headers;
  if (request.ranged) {
    headers.emplace_back("range", "bytes=" + std::to_string(request.offset) + "-" +
                                      std::to_string(request.offset + std::max<std::uint64_t>(request.length, 1) - 1));
  }
  // A weak ETag in If-Match never matches (strict servers answer 412): send only strong ones; the answers'
  // ETags are still checked.
  if (request.etag) {
    if (const std::string etag = request.etag->current(); is_strong_etag(etag)) headers.emplace_back("if-match", etag);
  }
  if (!target.credentials.empty()) {
    SigningInput in;
    in.method = request.head ? "HEAD" : "GET";
    in.canonical_uri = target.url.path;
    in.canonical_query = target.url.query;
    in.host = target.url.authority;
    in.region = target.region;
    in.amz_date = amz_date_now();
    for (const auto& h : headers) {
      if (h.first == "range") in.headers.push_back(h);
    }
    for (auto& h : sign(in, target.credentials)) headers.push_back(std::move(h));
  }
  curl_slist* list = nullptr;
  for (const auto& [name, value] : headers) list = curl_slist_append(list, (name + ": " + value).c_str());
  list = curl_slist_append(list, "Accept-Encoding: identity");

  char curl_error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(easy, CURLOPT_URL, target.request_url.c_str());
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, curl_error);
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, target.credentials.empty() ? 1L : 0L);
  curl_easy_setopt(easy, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(easy, CURLOPT_NOBODY, request.head ? 1L : 0L);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(easy, CURLOPT_XFERINFODATA, &sink);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(settings.connect_timeout_ms));
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 512L * 1024);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, settings.verify_tls ? 1L : 0L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, settings.verify_tls ? 2L : 0L);

  // The transfer runs on this thread; the poll's timeout makes libcurl call on_progress every kTickMs
  // even while no byte moves, so a stop, a stall or a deadline ends it within that time.
  CURLcode code = CURLE_OK;
  if (CURLMcode added = curl_multi_add_handle(multi, easy); added != CURLM_OK) {
    code = CURLE_FAILED_INIT;
  } else {
    int running = 1;
    while (running > 0) {
      if (curl_multi_perform(multi, &running) != CURLM_OK) break;
      if (running > 0) curl_multi_poll(multi, nullptr, 0, kTickMs, nullptr);
    }
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) code = msg->data.result;
    }
    curl_multi_remove_handle(multi, easy);
  }
  curl_slist_free_all(list);

  long connects = 0;
  curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
  result.new_connections = static_cast<std::uint64_t>(std::max(0L, connects));
  if (sink.response.status == 0) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &sink.response.status);
  const bool ok_status = sink.response.status >= 200 && sink.response.status <= 299;
  if (ok_status && !request.head && !sink.checked && sink.fatal.ok()) check_answer(sink);
  result.bytes = sink.written;
  result.response = std::move(sink.response);
  const Response& a = result.response;

  auto finish = [&](Outcome outcome, Status cause) {
    result.outcome = outcome;
    result.cause = std::move(cause);
    return result;
  };
  if (!sink.fatal.ok()) return finish(Outcome::fail, sink.fatal);
  // Every byte asked for arrived and was checked: what went wrong after them (a chunked body without
  // its last chunk, a reset after the body) costs nothing, and a retry would have nothing left to ask for.
  const bool complete = ok_status && request.dst && sink.checked && sink.written == request.length;
  if (complete) return finish(Outcome::done, Status());
  if (sink.abort == Abort::stopped) return finish(Outcome::fail, Status(ErrorCode::cancelled, "the request was cancelled"));
  if (sink.abort == Abort::stalled) {
    return finish(Outcome::retry,
                  Status(ErrorCode::unavailable,
                         fmt::format("no byte for {} ms (remote_stall_timeout_ms) after {} of {} bytes",
                                     settings.stall_timeout_ms, sink.written, request.length)));
  }
  if (sink.abort == Abort::too_slow) {
    const double seconds = std::chrono::duration<double>(Clock::now() - sink.started).count();
    return finish(Outcome::retry,
                  Status(ErrorCode::unavailable,
                         fmt::format("too slow: {} of {} bytes in {:.1f} s, below remote_min_rate ({} bytes/s after "
                                     "the {} ms of remote_stall_timeout_ms)",
                                     sink.written, request.length, seconds, settings.min_rate,
                                     settings.stall_timeout_ms)));
  }
  if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && sink.stopped)) {
    std::string text = curl_error[0] ? curl_error : curl_easy_strerror(code);
    text = "curl error " + std::to_string(static_cast<int>(code)) + ": " + printable(text);
    if (retryable_curl_code(code)) return finish(Outcome::retry, Status(ErrorCode::unavailable, text));
    const bool cannot_reach = code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_RESOLVE_PROXY;
    return finish(Outcome::fail, Status(cannot_reach ? ErrorCode::unavailable : ErrorCode::io_error, text));
  }
  if (ok_status) {
    if (request.head || !request.dst || sink.written == request.length) return finish(Outcome::done, Status());
    return finish(Outcome::retry, Status(ErrorCode::io_error, "the body ended after " + std::to_string(sink.written) +
                                                                  " of " + std::to_string(request.length) + " bytes"));
  }
  std::string text = "HTTP " + std::to_string(a.status);
  if (!a.reason.empty()) text += " " + printable(a.reason);
  if (const std::string s3 = s3_error_text(a.error_body); !s3.empty()) text += " (" + printable(s3) + ")";
  const long st = a.status;
  if (st == 408 || st == 429 || st >= 500) return finish(Outcome::retry, Status(ErrorCode::unavailable, text));
  if (st == 412) {
    const std::string etag = request.etag ? request.etag->current() : std::string();
    return finish(Outcome::fail, changed("If-Match " + printable(etag) + " failed: " + text));
  }
  ErrorCode ec = ErrorCode::io_error;
  if (st == 404 || st == 410) ec = ErrorCode::not_found;
  if (st == 401 || st == 403) ec = ErrorCode::permission_denied;
  if (st == 416) ec = ErrorCode::out_of_range;
  if (st == 400) ec = ErrorCode::invalid_argument;
  return finish(Outcome::fail, Status(ec, text));
}

}  // namespace ferry::detail::remote
