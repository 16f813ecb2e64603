"""A limiter service as many are first written: GET the count, compare, SET it back.

10 requests per second per tenant in aligned one-second windows, state in Redis, Python's
standard library only. The GET and the SET are two round trips, so instances racing on one
key both read the same count and both admit: the verifier's race scenario shows by how much.

    python3 service.py PORT REDIS_HOST REDIS_PORT
"""

import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LIMIT = 10
PERIOD_S = 1


def command(sock, *args):
    """Sends one Redis command and returns its reply (bytes, int or None)."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    reader = sock.makefile("rb")
    line = reader.readline()
    if line.startswith(b"$-1"):
        return None
    if line.startswith(b"$"):
        return reader.read(int(line[1:]) + 2)[:-2]
    if line.startswith(b":"):
        return int(line[1:])
    if line.startswith(b"-"):
        raise RuntimeError(line.decode().strip())
    return line.strip()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/health":
            return self.answer(200)
        tenant = self.headers.get("x-tenant", "anonymous")
        window = int(time.time() // PERIOD_S)
        key = "getset:%s:%d" % (tenant, window)
        try:
            with socket.create_connection((REDIS_HOST, REDIS_PORT), timeout=0.25) as sock:
                count = int(command(sock, "GET", key) or 0)
                if count >= LIMIT:
                    return self.answer(429)
                command(sock, "SET", key, count + 1, "EX", 2 * PERIOD_S)
        except (OSError, RuntimeError):
            # Fails open, and says so.
            return self.answer(200, degraded=True)
        self.answer(200)

    def answer(self, status, degraded=False):
        self.send_response(status)
        if degraded:
            self.send_header("x-degraded", "redis unreachable")
        self.send_header("content-length", "0")
        self.end_headers()


if __name__ == "__main__":
    PORT, REDIS_HOST, REDIS_PORT = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
