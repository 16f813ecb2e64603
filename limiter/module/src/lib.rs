//! A Redis module that decides rate limits as native commands: what the library's Lua scripts
//! decide, without Lua. A script pays Redis's Lua for every table it makes, every C function it
//! calls and every argument and reply it converts (the bench counts it: a GCRA decision is
//! about 51,000 instructions of Redis's, a `GET` and a `SET` run from a script 24,500, and an
//! `INCR` about 2,000). The module's commands decide in about 14,000 to 19,000 (GCRA, the
//! token bucket, the windows) and 30,000 (the sliding log, which goes through Redis's
//! sorted-set commands), and two rules in one `RATELIMIT.RULES` in about 37,000: most of it
//! Redis's own work of reading the key, writing it with its expiry and replicating the write;
//! the arithmetic is a few hundred.
//!
//! Each command takes exactly the KEYS and ARGV of its algorithm's script, in the same order,
//! answers the same reply, writes the same value with the same TTL, and is computed by the very
//! twin the script mirrors (`redis_ratelimit::harness::algo`), so there is no third copy of the
//! arithmetic. Writes are replicated by their effect (`SET key value PXAT instant`), not as the
//! command, so replicas and the AOF replay a plain write whatever the command decided.
//!
//! | command | KEYS and ARGV | script |
//! |---|---|---|
//! | `RATELIMIT.FW` | `stem now_ms limit window_ms cost` | `lua/fixed_window.lua` |
//! | `RATELIMIT.SW` | `stem now_ms limit window_ms cost` | `lua/sliding_window.lua` |
//! | `RATELIMIT.SL` | `key now_ms limit window_ms cost` | `lua/sliding_log.lua` |
//! | `RATELIMIT.TB` | `key now_ms limit period_ms burst cost` | `lua/token_bucket.lua` |
//! | `RATELIMIT.GCRA` | `key now_ms interval_us burst cost` | `lua/gcra.lua` |
//! | `RATELIMIT.RULES` | `key numkeys [key ...] rules commit [rule ...]` | `lua/all_or_nothing.lua` |
//! | `RATELIMIT.LEASE.GCRA` | `key now_ms interval_us burst lifetime_us horizon_us want need give given_tat` | `lua/lease_gcra.lua` |
//! | `RATELIMIT.LEASE.TB` | `key now_ms limit period_ms burst lifetime_ms horizon_ms want need give given_units given_ms` | `lua/lease_token_bucket.lua` |
//! | `RATELIMIT.CONCURRENCY` | `key now_ms limit lease_ms holder op` | `lua/concurrency.lua` |
//!
//! `now_ms` empty decides on Redis's clock (GCRA in microseconds, as its script reads `TIME`).
//! A window command's first argument is the stem its windows' keys extend (`stem:index`, in the
//! stem's hash tag), as the scripts take it. Each algorithm's reply is `[allowed, remaining,
//! retry_after_ms, reset_after_ms, now_ms]`. Arguments the library would never send (a quota it
//! refuses, a cost above the quota's capacity, anything but digits) are refused by name, where
//! a script would compute something: inside Redis the twins' arithmetic must stay in the range
//! where it is exact.
//!
//! `RATELIMIT.RULES` decides several rules of one request at one clock reading, consuming from
//! every rule or from none: the all-or-nothing script's KEYS and ARGV, with the key count moved
//! after the first key (each rule's algorithm, shadow and blockable flags, key and argument
//! counts and its script's ARGV; a blockable rule runs behind its key's block). Its keys move
//! with that count, so it declares `getkeys-api` and tells Redis where they are. The lease
//! commands reserve a run of a bucket's units for one instance, as the lease scripts do, and
//! answer their nine numbers. `RATELIMIT.CONCURRENCY` acquires, renews, releases or peeks at a
//! key's permits (`op`), a sorted set of holders each scored by the end of its lease, and
//! answers as an algorithm does; on Redis's clock it reads milliseconds.
//!
//! Load it with `redis-server --loadmodule path/to/libredis_ratelimit_module.so` or
//! `MODULE LOAD`; the commands declare their keys, so Redis Cluster routes them by them.
//!
//! The commands are written against `redis_ratelimit_module_commands::Keys`, what a Redis
//! offers a command, in a crate of their own that the harness's Redis model runs too; this
//! crate is that trait over Redis's module API (`server`) and the registration.

#![forbid(unsafe_code)]

mod clock;
mod server;
