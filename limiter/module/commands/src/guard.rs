//! A rule behind its key's block (`lua/guard.lua`, which the library's blockable and
//! all-or-nothing scripts splice in; `algo::block::guarded` is the twin): until the instant
//! the block ends, a request is refused whatever the quota says and writes nothing; then the
//! key decides by its state again, which the block left as it was.
//!
//! The block is a string holding that instant in ms on the clock the limiter decides by, read
//! as the script reads it (`stored_int`: anything else there is no block).

use redis_ratelimit::Algorithm;

use crate::args::int;
use crate::held::Held;
use crate::number::stored_int;
use crate::{decide, Keys, Refusal};

/// Decides `algorithm` with `args` (its keys, then its script's ARGV) behind the block at
/// `block`: the script's reply.
pub(crate) fn guarded(
    algorithm: Algorithm,
    keys: &mut impl Keys,
    args: &[&[u8]],
    block: &[u8],
) -> Result<[u64; 5], Refusal> {
    let Some(ends) = keys.string(block, stored_int).map_err(|_| Refusal::WrongType)?.flatten() else {
        return decide(algorithm, keys, args);
    };
    // ARGV[1] (after the algorithm's one key) is the caller's clock, or empty for Redis's.
    let now_ms = match args.get(1) {
        Some(&b"") | None => keys.now_us() / 1_000,
        Some(now) => int(now, "RATELIMIT.RULES", "now_ms")?,
    };
    if now_ms >= ends {
        return decide(algorithm, keys, args);
    }
    // Blocked: decided with the request's cost through writes that never happen, for when
    // the request alone would fit and when the key is at rest; the block outlasts both or not.
    let out = decide(algorithm, &mut Held::new(keys, None), args)?;
    let [allowed, _, retry_after, reset_after, decided_at] = out;
    let retry = if allowed == 0 { retry_after } else { 0 };
    let mut reset = reset_after;
    if let Some((&cost, rest)) = args.split_last() {
        if allowed == 1 && int(cost, "RATELIMIT.RULES", "cost")? > 0 {
            let mut peek = rest.to_vec();
            peek.push(b"0");
            reset = decide(algorithm, &mut Held::new(keys, None), &peek)?[3];
        }
    }
    let left = ends - now_ms;
    Ok([0, 0, retry.max(left), reset.max(left), decided_at])
}
