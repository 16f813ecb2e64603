//! `RATELIMIT.RULES`: several rules of one request decided at one clock reading, consuming
//! from all of them or from none (`lua/all_or_nothing.lua`; `algo::all_or_nothing` is the
//! twin). Each rule is decided once, with its cost, by its algorithm's command through
//! [`Held`], which holds its writes back; they are made only if every enforced rule fits. A
//! rule that fitted in a request that is refused reports its standing as a peek (cost 0) does,
//! decided again: nothing was written in between, so it reads what it read the first time.
//!
//! Arguments: the script's KEYS and ARGV, with the key count after the first key, so that the
//! command's first argument is a key (a cluster client routes a command it does not know by
//! its first argument; Redis asks the module where the others are):
//!
//! ```text
//! RATELIMIT.RULES key numkeys [key ...] rules commit
//!     [algorithm shadow blockable nkeys nargs arg ...] ...
//! ```
//!
//! `numkeys` counts every key, the first among them; `rules` is the number of rules; `commit`
//! is `1` to consume, `0` for a dry run; per rule its algorithm's key suffix (`fw`, `sw`, `sl`,
//! `tb`, `gcra`), `1` for a shadow rule, `1` for a blockable rule (its block the last of its
//! keys), its key count, its argument count and its script's ARGV (the cost last). The reply:
//! `[allowed, rules, then per rule allowed, remaining, retry_after_ms, reset_after_ms, now_ms,
//! consumed]`.

use redis_ratelimit::harness::scripts::key_suffix;
use redis_ratelimit::Algorithm;

use crate::args::int;
use crate::held::Held;
use crate::{decide, guard, Keys, Refusal};

const NAME: &str = "RATELIMIT.RULES";

/// One rule, as its arguments name it.
struct Rule<'a> {
    algorithm: Algorithm,
    shadow: bool,
    /// Its algorithm's key, then its script's ARGV.
    args: Vec<&'a [u8]>,
    block: Option<&'a [u8]>,
}

fn refused(what: String) -> Refusal {
    Refusal::Error(format!("ERR {NAME}: {what}"))
}

/// `0` or `1`, named `field` in an error.
fn flag(arg: Option<&&[u8]>, field: &str) -> Result<bool, Refusal> {
    match arg {
        Some(&b"0") => Ok(false),
        Some(&b"1") => Ok(true),
        Some(other) => Err(refused(format!("{field} must be 0 or 1, not '{}'", String::from_utf8_lossy(other)))),
        None => Err(Refusal::Arity),
    }
}

/// The keys (the first, then the others after the count), and where what follows them begins.
fn split_keys<'a>(args: &[&'a [u8]]) -> Result<(Vec<&'a [u8]>, usize), Refusal> {
    let (&[first, count], rest) = args.split_first_chunk::<2>().ok_or(Refusal::Arity)?;
    let count = int(count, NAME, "numkeys")? as usize;
    if count == 0 || count - 1 > rest.len() {
        return Err(refused(format!("numkeys {count} is not between 1 and the {} keys given", rest.len() + 1)));
    }
    let mut keys = vec![first];
    keys.extend_from_slice(&rest[..count - 1]);
    Ok((keys, count + 1))
}

/// The rules of the command's arguments, and whether it consumes.
fn parse<'a>(args: &[&'a [u8]]) -> Result<(Vec<Rule<'a>>, bool), Refusal> {
    let (keys, after) = split_keys(args)?;
    let argv = &args[after..];
    let n = int(argv.first().ok_or(Refusal::Arity)?, NAME, "rules")?;
    let commit = flag(argv.get(1), "commit")?;
    let (mut k, mut a) = (0usize, 2usize);
    let mut rules = Vec::new();
    for i in 1..=n {
        let suffix = argv.get(a).ok_or(Refusal::Arity)?;
        let Some(algorithm) = Algorithm::ALL.into_iter().find(|&x| key_suffix(x).as_bytes() == *suffix) else {
            return Err(refused(format!("rule {i}'s algorithm '{}' is unknown", String::from_utf8_lossy(suffix))));
        };
        let shadow = flag(argv.get(a + 1), "shadow")?;
        let blockable = flag(argv.get(a + 2), "blockable")?;
        let nkeys = int(argv.get(a + 3).ok_or(Refusal::Arity)?, NAME, "a rule's key count")? as usize;
        let nargs = int(argv.get(a + 4).ok_or(Refusal::Arity)?, NAME, "a rule's argument count")? as usize;
        let own = keys.get(k..k.saturating_add(nkeys)).ok_or_else(|| refused(format!("rule {i} has too few keys")))?;
        let ruled = argv.get(a + 5..(a + 5).saturating_add(nargs)).ok_or(Refusal::Arity)?;
        // An algorithm takes one key of its own; a blockable rule's block follows it.
        let wanted = 1 + usize::from(blockable);
        if nkeys != wanted {
            let which = if blockable { "its key and its block" } else { "its key" };
            return Err(refused(format!("rule {i} has {nkeys} keys, not {wanted} ({which})")));
        }
        let mut args = vec![own[0]];
        args.extend_from_slice(ruled);
        rules.push(Rule { algorithm, shadow, args, block: blockable.then(|| own[1]) });
        k += nkeys;
        a += 5 + nargs;
    }
    if k != keys.len() || a != argv.len() {
        return Err(refused(format!(
            "the rules name {k} keys and {a} arguments after the keys, not {} and {}",
            keys.len(),
            argv.len()
        )));
    }
    Ok((rules, commit))
}

/// One rule decided through `keys` (its writes held): the script's reply for it.
fn decide_rule(rule: &Rule<'_>, keys: &mut impl Keys, args: &[&[u8]]) -> Result<[u64; 5], Refusal> {
    match rule.block {
        Some(block) => guard::guarded(rule.algorithm, keys, args, block),
        None => decide(rule.algorithm, keys, args),
    }
}

/// See the module docs.
pub(crate) fn rules(keys: &mut impl Keys, args: &[&[u8]]) -> Result<Vec<u64>, Refusal> {
    let (rules, commit) = parse(args)?;
    // Every rule decided once with its cost, its writes held; one clock reading for all.
    let mut now_us = None;
    let mut decided = Vec::with_capacity(rules.len());
    for rule in &rules {
        let mut held = Held::new(&mut *keys, now_us);
        let reply = decide_rule(rule, &mut held, &rule.args)?;
        now_us = held.reading();
        let writes = held.into_writes();
        decided.push((reply, writes));
    }
    let all_fit = rules.iter().zip(&decided).all(|(rule, (reply, _))| reply[0] == 1 || rule.shadow);
    let take = commit && all_fit;
    let mut out = Vec::with_capacity(2 + 6 * rules.len());
    out.extend([u64::from(all_fit), rules.len() as u64]);
    for (rule, (mut reply, writes)) in rules.iter().zip(decided) {
        let mut consumed = 0;
        if reply[0] == 1 && rule.args.last() != Some(&&b"0"[..]) {
            if take {
                writes.make(&mut *keys)?;
                consumed = 1;
            } else {
                // Left unwritten: its standing as a peek reports it.
                let mut peek = rule.args.clone();
                if let Some(cost) = peek.last_mut() {
                    *cost = b"0";
                }
                let mut held = Held::new(&mut *keys, now_us);
                reply = decide_rule(rule, &mut held, &peek)?;
            }
        }
        out.extend(reply);
        out.push(consumed);
    }
    Ok(out)
}

/// Where `RATELIMIT.RULES`'s keys are among `args` (after its name): the first, then the
/// `numkeys - 1` after the count, as far as there are arguments.
pub(crate) fn key_positions(args: &[&[u8]]) -> Vec<usize> {
    let others = args.get(1).and_then(|n| int(n, NAME, "numkeys").ok()).unwrap_or(1).saturating_sub(1);
    let mut positions = vec![0];
    positions.extend((2..args.len()).take(others.min(args.len() as u64) as usize));
    positions.retain(|&p| p < args.len());
    positions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_first_argument_and_as_many_after_the_count_as_there_are() {
        let args: Vec<&[u8]> = vec![b"a", b"3", b"b", b"c", b"2", b"1"];
        assert_eq!(key_positions(&args), [0, 2, 3]);
        assert_eq!(key_positions(&args[..3]), [0, 2], "a count past the arguments");
        assert_eq!(key_positions(&[b"a", b"x", b"b"]), [0], "a count that is no number");
        assert_eq!(key_positions(&[b"a"]), [0]);
        assert!(key_positions(&[]).is_empty());
    }
}
