"""A limiter service on PyPI's `limits` library (its Redis storage), as its users write one.

10 requests per second per tenant (the `x-tenant` header). With `fixed` (the default),
`FixedWindowRateLimiter`: one Lua script INCRBYs a counter and EXPIREs it when it is new, so a
window opens at its first request and lasts a second on Redis's clock, denied requests counted
too (the library's README through its 3.x releases said its fixed windows reset at the start
of each minute or hour: not what its Redis storage does). With `moving` (no subject file ships
for it yet), `MovingWindowRateLimiter`: a log of timestamps per key in a Redis list, which one
Lua script checks and appends to, stamped by the instance's own clock (`time.time()`, sent to
the script). Without Redis (an error, or no answer within 250 ms) it fails open and says so in
`x-degraded`.

    python service.py PORT REDIS_URL [fixed|moving]
"""

import math
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from limits import RateLimitItemPerSecond
from limits.storage import RedisStorage
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

LIMIT = RateLimitItemPerSecond(10, 1)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/health":
            return self.answer(200)
        tenant = self.headers.get("x-tenant", "anonymous")
        try:
            if LIMITER.hit(LIMIT, tenant):
                return self.answer(200)
            # When the window frees a unit (an epoch time): the key's TTL from now (whole
            # seconds), or the oldest entry of the log plus the period.
            reset = LIMITER.get_window_stats(LIMIT, tenant).reset_time
            return self.answer(429, retry_after=max(1, math.ceil(reset - time.time())))
        except RedisError:
            return self.answer(200, degraded=True)

    def answer(self, status, degraded=False, retry_after=None):
        self.send_response(status)
        if degraded:
            self.send_header("x-degraded", "redis unreachable")
        if retry_after is not None:
            self.send_header("retry-after", str(retry_after))
        self.send_header("content-length", "0")
        self.end_headers()


if __name__ == "__main__":
    PORT, REDIS_URL = int(sys.argv[1]), sys.argv[2]
    STRATEGY = sys.argv[3] if len(sys.argv) > 3 else "fixed"
    # 250 ms for Redis to answer; redis-py's default retries a dropped connection after a
    # backoff: off, so an error answers at once.
    STORAGE = RedisStorage(
        REDIS_URL,
        socket_timeout=0.25,
        socket_connect_timeout=0.25,
        retry=Retry(NoBackoff(), 0),
    )
    LIMITER = {"fixed": FixedWindowRateLimiter, "moving": MovingWindowRateLimiter}[STRATEGY](STORAGE)
    # http.server listens with a backlog of 5: a burst of connections beyond it waits out a
    # SYN retransmission (a second) before it is even read.
    ThreadingHTTPServer.request_queue_size = 128
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
