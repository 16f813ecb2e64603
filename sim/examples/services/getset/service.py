"""A limiter service as many are first written: GET the count, compare, SET it back.

10 requests per second per tenant in aligned one-second windows numbered by the instance's own
clock, state in Redis, Python's standard library only. The GET and the SET are two round trips,
so instances racing on one key both read the same count and both admit: the verifier's race
scenario shows by how much. With `incr` it counts with one INCR instead (and sets the TTL in
the same round trip), which no race can split.

    python3 service.py PORT REDIS_HOST REDIS_PORT [getset|incr]
"""

import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LIMIT = 10
PERIOD_S = 1


def encode(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def command(sock, *args):
    """Sends one Redis command and returns its reply (bytes, int or None)."""
    sock.sendall(encode(*args))
    return reply(sock.makefile("rb"))


def reply(reader):
    line = reader.readline()
    if line.startswith(b"$-1"):
        return None
    if line.startswith(b"$"):
        return reader.read(int(line[1:]) + 2)[:-2]
    if line.startswith(b":"):
        return int(line[1:])
    if line.startswith(b"-"):
        raise RuntimeError(line.decode().strip())
    if not line:
        raise OSError("Redis closed the connection")
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
                if MODE == "incr":
                    # INCR and EXPIRE in one round trip: every request counts, admitted or not.
                    sock.sendall(encode("INCR", key) + encode("EXPIRE", key, 2 * PERIOD_S))
                    reader = sock.makefile("rb")
                    count, _ = reply(reader), reply(reader)
                    if count > LIMIT:
                        return self.answer(429)
                    return self.answer(200)
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
    MODE = sys.argv[4] if len(sys.argv) > 4 else "getset"
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
