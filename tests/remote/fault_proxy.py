#!/usr/bin/python3
"""A fault-injecting HTTP/1.1 proxy for Ferry's remote tests: it sits on loopback in front of a real
server (nginx), forwards every request to it, and spoils the answers it is told to spoil.

    fault_proxy.py UPSTREAM_PORT        prints "port N" once it listens on 127.0.0.1:N

The test sets the fault with a control request, GET /__fault?mode=M&count=C&on=GET (count -1: every
request from now on; `on` is GET, HEAD or ANY, default GET), and reads what the proxy saw with GET /__log
(a JSON list of [method, range, if-match] per forwarded request). Modes:

  status:CODE       answer CODE (503, 403, 404, 405, ...) without asking the upstream
  reset             send the headers and half the body, then reset the connection (RST)
  truncate          send the headers (with the full Content-Length) and half the body, then close
  wrong_range       shift the Content-Range by one byte
  no_content_range  drop the Content-Range header
  ignore_range      drop the request's Range header (the upstream answers 200 with the whole file) and
                    the answer's Accept-Ranges: a server without range support
  drop_if_match     drop the request's If-Match header: a server that ignores it
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
import urllib.parse

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.mode = "none"
        self.count = 0
        self.on = "GET"
        self.log = []

    def set(self, mode, count, on):
        with self.lock:
            self.mode, self.count, self.on = mode, count, on
            self.log = []

    def take(self, method, headers):
        """The fault for this request (and uses one up), and records the request."""
        with self.lock:
            self.log.append([method, headers.get("Range", ""), headers.get("If-Match", "")])
            if self.mode == "none" or self.count == 0 or (self.on != "ANY" and method != self.on):
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
            FAULTS.set(q.get("mode", ["none"])[0], int(q.get("count", ["-1"])[0]), q.get("on", ["GET"])[0])
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
            body = b"" if method == "HEAD" else ("injected %d\n" % code).encode()
            self.send_response_only(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if fault == "ignore_range":
            headers = {k: v for k, v in headers.items() if k.lower() != "range"}
        if fault == "drop_if_match":
            headers = {k: v for k, v in headers.items() if k.lower() != "if-match"}
        answer, body = self.ask_upstream(method, headers)
        out = [(k, v) for k, v in answer.getheaders() if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"]
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
        length = answer.getheader("Content-Length", str(len(body))) if method == "HEAD" else str(len(body))
        self.send_response_only(answer.status, answer.reason)
        for k, v in out:
            self.send_header(k, v)
        self.send_header("Content-Length", length)
        self.end_headers()
        if method == "HEAD":
            return
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
