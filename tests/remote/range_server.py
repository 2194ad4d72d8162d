#!/usr/bin/env python3
"""A small HTTP/1.1 file server with range requests, for machines without nginx (the GPU machine): serves
one directory on 127.0.0.1, answers HEAD and GET with a single `Range: bytes=A-B`, sends an ETag made of
the file's size and mtime and honours If-Match (412 when it differs).

    range_server.py DIR        prints "port N" once it listens; stops on SIGTERM or when stdin closes

The tests on the CPU machine use nginx (tests/remote/servers.cpp); this one is only a stand-in where nginx
cannot be installed. Standard library only.
"""

import http.server
import os
import re
import sys
import threading

ROOT = os.path.abspath(sys.argv[1])


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the tests read their own results
        pass

    def _target(self):
        path = os.path.abspath(os.path.join(ROOT, self.path.split("?", 1)[0].lstrip("/")))
        if not path.startswith(ROOT + os.sep) or not os.path.isfile(path):
            return None, None
        st = os.stat(path)
        return path, f'"{st.st_size:x}-{int(st.st_mtime_ns):x}"'

    def _empty(self, code):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self._answer(head=True)

    def do_GET(self):
        self._answer(head=False)

    def _answer(self, head):
        path, etag = self._target()
        if path is None:
            return self._empty(404)
        if_match = self.headers.get("If-Match")
        if if_match and if_match != etag:
            return self._empty(412)
        size = os.path.getsize(path)
        start, end = 0, size - 1
        ranged = self.headers.get("Range")
        if ranged:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", ranged.strip())
            if not m or int(m.group(1)) >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
        self.send_response(206 if ranged else 200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(end - start + 1))
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if head:
            return
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"port {server.server_address[1]}", flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
