//! `RATELIMIT.CONCURRENCY key now_ms limit lease_ms holder op`: a concurrency limit's permits
//! (`lua/concurrency.lua`), a sorted set of holders each scored by the end of its lease,
//! decided by the twin (`algo::concurrency`) on the holders whose leases are live.
//!
//! Its writes are the script's: every operation but a peek first drops the ended leases; the
//! holder is added, its score moved, or removed as the twin says; and after any of those the
//! key's TTL is moved to its last lease, as the script's `settle` does. A refused acquire or
//! renewal writes nothing more than the drop, which cannot end the last live lease.

use redis_ratelimit::harness::algo::concurrency::{self, PermitOp, Permits, MAX_LEASE_MS};
use redis_ratelimit::harness::algo::Outcome;

use crate::args::{int, now_us};
use crate::{Keys, Kind, Refusal};

const NAME: &str = "RATELIMIT.CONCURRENCY";

/// See the module docs.
pub(super) fn concurrency(keys: &mut impl Keys, args: &[&[u8]]) -> Result<[u64; 5], Refusal> {
    let &[key, now, limit, lease, holder, op] = args else {
        return Err(Refusal::Arity);
    };
    let limit = int(limit, NAME, "limit")?;
    let lease_ms = int(lease, NAME, "lease_ms")?;
    if limit == 0 || !(1..=MAX_LEASE_MS).contains(&lease_ms) {
        return Err(Refusal::Error(format!(
            "ERR {NAME}: limit {limit} must be at least 1 and lease_ms {lease_ms} from 1 to {MAX_LEASE_MS}"
        )));
    }
    let op = PermitOp::named(op)
        .ok_or_else(|| Refusal::Error(format!("ERR {NAME}: unknown operation {}", String::from_utf8_lossy(op))))?;
    let holder_text = std::str::from_utf8(holder)
        .map_err(|_| Refusal::Error(format!("ERR {NAME}: the holder's token is not UTF-8")))?;
    let now_ms = now_us(keys, now, NAME)? / 1_000;
    match keys.string(key, |_| ()) {
        Ok(None) | Err(Kind::ZSet) => {}
        _ => return Err(Refusal::WrongType),
    }
    let (live, ended) = holders(keys, key, now_ms)?;
    let before = live.holders.get(holder_text).copied();
    let mut state = (!live.holders.is_empty()).then_some(live);
    let outcome: Outcome = concurrency::step(limit, lease_ms, &mut state, now_ms, op, holder_text);
    if op == PermitOp::Peek {
        return Ok(crate::reply(&outcome, now_ms));
    }
    // The script's trim, where it has something to drop.
    if ended {
        keys.trim(key, now_ms)?;
    }
    let after = state.as_ref().and_then(|s| s.holders.get(holder_text).copied());
    let wrote = match (before, after) {
        (_, Some(end)) => {
            if before != Some(end) {
                keys.add(key, end, &[holder_text.to_owned()])?;
            }
            true
        }
        (Some(_), None) => {
            keys.remove(key, holder)?;
            true
        }
        (None, None) => false,
    };
    // The script's `settle`: the key lives as long as its last lease (an empty set is gone).
    if wrote && outcome.reset_after_ms > 0 {
        keys.expire(key, outcome.reset_after_ms)?;
    }
    Ok(crate::reply(&outcome, now_ms))
}

/// The holders of `key` whose leases end after `now_ms`, and whether it holds any whose lease
/// has ended (scored at most `now_ms`, which every write drops). A live member scored other
/// than a whole number of ms, or not UTF-8 (no writer of this key's does either), is refused by
/// name.
fn holders(keys: &mut impl Keys, key: &[u8], now_ms: u64) -> Result<(Permits, bool), Refusal> {
    let mut permits = Permits::default();
    let mut ended = false;
    let refused =
        |what: String| Refusal::Error(format!("ERR {NAME}: the holders {} {what}", String::from_utf8_lossy(key)));
    for (member, text) in keys.members_above(key, None)? {
        let score = std::str::from_utf8(&text).ok().and_then(|s| s.parse::<f64>().ok());
        if score.is_some_and(|score| score <= now_ms as f64) {
            ended = true;
            continue;
        }
        let Some(end) = std::str::from_utf8(&text).ok().and_then(|s| s.parse::<u64>().ok()) else {
            return Err(refused(format!(
                "hold a member scored {}, not a whole number of ms",
                String::from_utf8_lossy(&text)
            )));
        };
        let member = String::from_utf8(member).map_err(|_| refused("hold a member that is not UTF-8".into()))?;
        permits.holders.insert(member, end);
    }
    Ok((permits, ended))
}
