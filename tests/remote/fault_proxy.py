#!/usr/bin/python3
"""A fault-injecting HTTP/1.1 proxy for Ferry's remote tests: it sits on loopback in front of a real
server (nginx), forwards every request to it, and spoils the answers it is told to spoil.

    fault_proxy.py UPSTREAM_PORT        prints "port N" once it listens on 127.0.0.1:N

The test sets the fault with a control request, GET /__fault?mode=M&count=C&on=GET&after=N (count -1:
every request from now on; `on` is GET, HEAD or ANY, default GET; `after`: let the first N matching
requests through unspoiled, default 0), and reads what the proxy saw with GET /__log (a JSON list of
[method, range, if-match] per forwarded request). Modes:

  status:CODE       answer CODE (503, 403, 404, 405, ...) without asking the upstream; `reason=` sets
                    the status text and `body=` the body (percent-encoded: control bytes get through)
  reset             send the headers and half the body, then reset the connection (RST)
  truncate          send the headers (with the full Content-Length) and half the body, then close
  wrong_range       shift the Content-Range by one byte
  no_content_range  drop the Content-Range header
  ignore_range      drop the request's Range header (the upstream answers 200 with the whole file) and
                    the answer's Accept-Ranges: a server without range support
  drop_if_match     drop the request's If-Match header: a server that ignores it
  slow:RATE         send the body at RATE bytes per second (a server that never quite stalls)
  stall:BYTES       send the headers and the first BYTES of the body, then nothing (the connection stays)
  claim:SIZE        pretend the object holds SIZE bytes: HEAD says so, a GET gets 206 headers for the
                    range asked (total SIZE) and then no body at all
  etag_flip         no ETag to HEAD; GET answers carry ETag "v1" and "v2" in turn (an object replaced
                    again and again while HEAD says nothing)
  etag_bytes        the ETag holds bytes >= 0x80 ("\xff\xfe-etag")
  weak_etag         ETags made weak (W/"..."), and a request whose If-Match is weak answered 412, as a
                    server that compares strongly (RFC 9110) must
  chunked_no_end    the whole body in chunked encoding without its last (empty) chunk, then close
  none              forward faithfully

Standard library only, for Debian's /usr/bin/python3. It stops on SIGTERM or when stdin closes.
"""

import http.client
import http.server
import json
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.mode = "none"
        self.count = 0
        self.on = "GET"
        self.after = 0
        self.reason = None
        self.body = None
        self.flips = 0
        self.log = []

    def set(self, mode, count, on, after=0, reason=None, body=None):
        with self.lock:
            self.mode, self.count, self.on, self.after = mode, count, on, after
            self.reason, self.body = reason, body
            self.log = []

    def take(self, method, headers):
        """The fault for this request (and uses one up), and records the request."""
        with self.lock:
            self.log.append([method, headers.get("Range", ""), headers.get("If-Match", "")])
            if self.mode == "none" or self.count == 0 or (self.on != "ANY" and method != self.on):
                return "none"
            if self.after > 0:
                self.after -= 1
                return "none"
            if self.count > 0:
                self.count -= 1
            return self.mode


FAULTS = Faults()
UPSTREAM_PORT = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream = None

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.forward("HEAD")

    def do_GET(self):
        if self.path.startswith("/__fault"):
            q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
            reason, body = q.get("reason", [None])[0], q.get("body", [None])[0]
            FAULTS.set(q.get("mode", ["none"])[0], int(q.get("count", ["-1"])[0]), q.get("on", ["GET"])[0],
                       int(q.get("after", ["0"])[0]), reason, body.encode("latin-1") if body is not None else None)
            return self.reply_plain(200, b"ok\n")
        if self.path.startswith("/__log"):
            with FAULTS.lock:
                return self.reply_plain(200, json.dumps(FAULTS.log).encode())
        self.forward("GET")

    def reply_plain(self, code, body):
        self.send_response_only(code)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)

    def ask_upstream(self, method, headers):
        for attempt in range(2):
            if self.upstream is None:
                self.upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM_PORT, timeout=30)
            try:
                self.upstream.request(method, self.path, headers=headers)
                answer = self.upstream.getresponse()
                return answer, answer.read()
            except (http.client.HTTPException, OSError):
                self.upstream.close()
                self.upstream = None
                if attempt == 1:
                    raise

    def forward(self, method):
        fault = FAULTS.take(method, self.headers)
        if fault.startswith("status:"):
            code = int(fault.split(":", 1)[1])
            body = FAULTS.body if FAULTS.body is not None else ("injected %d\n" % code).encode()
            body = b"" if method == "HEAD" else body
            self.send_response_only(code, FAULTS.reason)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if fault == "ignore_range":
            headers = {k: v for k, v in headers.items() if k.lower() != "range"}
        if fault in ("drop_if_match", "etag_flip", "etag_bytes"):  # the last two make up their ETags
            headers = {k: v for k, v in headers.items() if k.lower() != "if-match"}
        if fault.startswith("claim:"):
            return self.claim(method, int(fault.split(":", 1)[1]))
        if fault == "weak_etag" and self.headers.get("If-Match", "").startswith("W/"):
            return self.reply_plain(412, b"weak ETags never match strongly\n")
        answer, body = self.ask_upstream(method, headers)
        out = [(k, v) for k, v in answer.getheaders() if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"]
        if fault in ("etag_flip", "etag_bytes", "weak_etag"):
            etag = dict((k.lower(), v) for k, v in out).get("etag", '"x"')
            out = [(k, v) for k, v in out if k.lower() != "etag"]
            if fault == "etag_bytes":
                out.append(("ETag", '"\xff\xfe-etag"'))  # latin-1 on the wire: the bytes 0xff 0xfe
            elif fault == "weak_etag":
                out.append(("ETag", "W/" + etag))
            elif method == "GET":
                with FAULTS.lock:
                    FAULTS.flips += 1
                    out.append(("ETag", '"v%d"' % (1 + FAULTS.flips % 2)))
        if fault == "ignore_range":
            out = [(k, v) for k, v in out if k.lower() != "accept-ranges"]
        if fault == "no_content_range":
            out = [(k, v) for k, v in out if k.lower() != "content-range"]
        if fault == "wrong_range":
            shifted = []
            for k, v in out:
                if k.lower() == "content-range" and v.startswith("bytes ") and "-" in v:
                    span, total = v[6:].split("/")
                    a, b = (int(x) for x in span.split("-"))
                    v = "bytes %d-%d/%s" % (a + 1, b + 1, total)
                shifted.append((k, v))
            out = shifted
        if fault == "chunked_no_end" and method == "GET":
            return self.chunked_without_end(answer, out, body)
        length = answer.getheader("Content-Length", str(len(body))) if method == "HEAD" else str(len(body))
        self.send_response_only(answer.status, answer.reason)
        for k, v in out:
            self.send_header(k, v)
        self.send_header("Content-Length", length)
        self.end_headers()
        if method == "HEAD":
            return
        if fault.startswith("slow:") or fault.startswith("stall:"):
            return self.trickle(body, fault)
        if fault in ("reset", "truncate"):
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            if fault == "reset":
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR) if fault == "truncate" else None
            self.connection.close()
            return
        self.wfile.write(body)

    def trickle(self, body, fault):
        """slow:RATE sends RATE bytes a second; stall:BYTES sends BYTES, then holds the connection."""
        kind, value = fault.split(":", 1)
        try:
            if kind == "stall":
                self.wfile.write(body[: int(value)])
                self.wfile.flush()
                self.connection.settimeout(120)
                self.connection.recv(1)  # until the client gives up (or 2 minutes pass)
            else:
                rate = max(1, int(value))
                step = max(1, rate // 10)
                for at in range(0, len(body), step):
                    self.wfile.write(body[at:at + step])
                    self.wfile.flush()
                    time.sleep(step / rate)
        except OSError:
            pass
        self.close_connection = True

    def claim(self, method, size):
        """HEAD: SIZE bytes with ranges; GET: 206 headers for the range asked, then no body, ever."""
        first, last = 0, size - 1
        asked = self.headers.get("Range", "")
        if asked.startswith("bytes="):
            a, _, b = asked[6:].partition("-")
            first, last = int(a), int(b) if b else size - 1
        self.send_response_only(206 if method == "GET" and asked else 200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"claimed"')
        if method == "GET" and asked:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
            self.send_header("Content-Length", str(last - first + 1))
        else:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        if method == "GET":
            self.trickle(b"", "stall:0")

    def chunked_without_end(self, answer, out, body):
        self.send_response_only(answer.status, answer.reason)
        for k, v in out:
            self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for at in range(0, len(body), 65536):
            piece = body[at:at + 65536]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a reset we caused, or a client that went away


def main():
    global UPSTREAM_PORT
    UPSTREAM_PORT = int(sys.argv[1])
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def watch_stdin():
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    print("port %d" % server.server_address[1], flush=True)
    stop.wait()
    server.shutdown()


if __name__ == "__main__":
    main()
