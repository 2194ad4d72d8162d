#include "remote/http_transfer.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>

#include <curl/curl.h>

namespace ferry::detail::remote {
namespace {

constexpr std::size_t kErrorBodyLimit = 4096;

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
  if (!r.if_match.empty() && !a.etag.empty() && strip_weak(a.etag) != strip_weak(r.if_match)) {
    s.fatal = changed("its ETag is now " + a.etag + ", was " + r.if_match);
    return;
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

Result<std::unique_ptr<Connection>> Connection::make() {
  global_init();
  CURL* easy = curl_easy_init();
  if (!easy) return Status(ErrorCode::internal, "curl_easy_init failed");
  return std::unique_ptr<Connection>(new Connection(easy));
}

Connection::~Connection() { curl_easy_cleanup(static_cast<CURL*>(easy_)); }

TransferResult Connection::perform(const Target& target, const Request& request,
                                   const ferry::remote::Options& options) {
  CURL* easy = static_cast<CURL*>(easy_);
  curl_easy_reset(easy);  // options only: the connection cache (keep-alive) survives
  Sink sink;
  sink.request = &request;
  TransferResult result;

  std::vector<Header> headers;
  if (request.ranged) {
    headers.emplace_back("range", "bytes=" + std::to_string(request.offset) + "-" +
                                      std::to_string(request.offset + std::max<std::uint64_t>(request.length, 1) - 1));
  }
  if (!request.if_match.empty()) headers.emplace_back("if-match", request.if_match);
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
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout_ms));
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(options.stall_timeout_ms / 1000)));
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 512L * 1024);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
  const CURLcode code = curl_easy_perform(easy);
  curl_slist_free_all(list);

  long connects = 0;
  curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
  result.new_connections = static_cast<std::uint64_t>(std::max(0L, connects));
  if (sink.response.status == 0) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &sink.response.status);
  const bool ok_status = sink.response.status >= 200 && sink.response.status <= 299;
  if (ok_status && !request.head && !sink.checked && sink.fatal.ok()) check_answer(sink);
  result.bytes = sink.written;
  result.whole_body = sink.whole_body;
  result.response = std::move(sink.response);
  const Response& a = result.response;

  auto finish = [&](Outcome outcome, Status cause) {
    result.outcome = outcome;
    result.cause = std::move(cause);
    return result;
  };
  if (!sink.fatal.ok()) return finish(Outcome::fail, sink.fatal);
  if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && sink.stopped)) {
    std::string text = curl_error[0] ? curl_error : curl_easy_strerror(code);
    text = "curl error " + std::to_string(static_cast<int>(code)) + ": " + text;
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
  if (!a.reason.empty()) text += " " + a.reason;
  if (const std::string s3 = s3_error_text(a.error_body); !s3.empty()) text += " (" + s3 + ")";
  const long st = a.status;
  if (st == 408 || st == 429 || st >= 500) return finish(Outcome::retry, Status(ErrorCode::unavailable, text));
  if (st == 412) {
    return finish(Outcome::fail, changed("If-Match " + request.if_match + " failed: " + text));
  }
  ErrorCode ec = ErrorCode::io_error;
  if (st == 404 || st == 410) ec = ErrorCode::not_found;
  if (st == 401 || st == 403) ec = ErrorCode::permission_denied;
  if (st == 416) ec = ErrorCode::out_of_range;
  if (st == 400) ec = ErrorCode::invalid_argument;
  return finish(Outcome::fail, Status(ec, text));
}

}  // namespace ferry::detail::remote
