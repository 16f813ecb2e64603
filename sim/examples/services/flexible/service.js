// A limiter service on npm's rate-limiter-flexible (RateLimiterRedis over ioredis), as its
// users write one.
//
// 10 points per second per tenant (the `x-tenant` header). RateLimiterRedis counts with one
// Lua script: SET key 0 EX duration NX, INCRBY, PTTL: a window that opens at its first request
// and lasts `duration` on Redis's clock, counting every request, denied ones too. Without Redis
// (no connection: enableOfflineQueue is off, so a command fails at once; or no answer within
// 250 ms) it fails closed: 503.
//
//     node service.js PORT REDIS_URL

const http = require('http');
const Redis = require('ioredis');
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');

const [port, redisUrl] = process.argv.slice(2);

const redis = new Redis(redisUrl, {
  enableOfflineQueue: false,
  commandTimeout: 250,
  connectTimeout: 250,
  maxRetriesPerRequest: 0,
  retryStrategy: () => 100,
});
// Errors reach each command's promise; the client reconnects by itself.
redis.on('error', () => {});

const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: 'flexible', points: 10, duration: 1 });

http
  .createServer(async (req, res) => {
    if (req.url === '/health') {
      res.writeHead(redis.status === 'ready' ? 200 : 503).end();
      return;
    }
    const tenant = req.headers['x-tenant'] || 'anonymous';
    try {
      await limiter.consume(tenant);
      res.writeHead(200).end();
    } catch (e) {
      if (e instanceof RateLimiterRes) {
        // Denied: its window's key expires in msBeforeNext (its PTTL).
        res.writeHead(429, { 'retry-after': String(Math.ceil(e.msBeforeNext / 1000)) }).end();
      } else {
        res.writeHead(503).end();
      }
    }
  })
  .listen(Number(port), '127.0.0.1');
