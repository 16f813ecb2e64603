//! Several rules decided as one: the twin of the all-or-nothing script (`crate::rules_script`).
//!
//! A request that matches several rules (100 per minute *and* 1,000 per day per API key, a
//! cap per route) must not consume from one rule when another denies it. This twin says what
//! the answer is, at one clock reading, in two steps:
//!
//! 1. **Peek** every rule (cost 0). For integer costs every algorithm admits cost `c` exactly
//!    when a peek reports `remaining >= c` (see [`fits`] and the tests below, which check it
//!    against each twin), so the peeks tell whether each rule would admit the request.
//! 2. If every enforced rule fits, **consume** from each rule that fits (shadow rules that do
//!    not fit are only reported). Otherwise consume nothing: a rule that does not fit answers
//!    as asked with the real cost (a denial, which writes nothing, with its Retry-After), and
//!    a rule that fits answers with its peek.
//!
//! A request of cost 0 peeks every rule and is allowed when every enforced peek is. The script
//! reaches the same answer in one pass (each rule run once with its cost, its writes held back
//! until every rule has fitted): that a rule admits cost `c` exactly when its peek reports
//! `remaining >= c` is what makes the two agree.

use super::block::guarded;
use super::{Outcome, State};
use crate::quota::{Algorithm, Quota};

/// One rule of a batch, with its key's state.
#[derive(Debug)]
pub struct RuleOnState<'a> {
    /// The rule's algorithm.
    pub algorithm: Algorithm,
    /// Its quota.
    pub quota: &'a Quota,
    /// Its key's state (None = no state yet).
    pub state: &'a mut Option<State>,
    /// The clock reading it is decided at (ms).
    pub now_ms: u64,
    /// What the request costs under this rule (0 = peek).
    pub cost: u64,
    /// A shadow rule is decided and reported but never denies the request.
    pub shadow: bool,
    /// When a block on its key ends, for a blockable rule (`algo::block`; None: no block).
    pub block: Option<u64>,
}

/// What one rule of a batch answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemOutcome {
    /// The rule's own answer: `allowed` is whether this rule alone admits the request.
    pub outcome: Outcome,
    /// Whether the request's cost was taken from this rule.
    pub consumed: bool,
}

/// What a batch answered: the request is allowed when every enforced rule admits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesOutcome {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// One answer per rule, in the order given.
    pub items: Vec<ItemOutcome>,
}

/// Whether a rule whose peek answered `peek` admits `cost`: for a cost above 0, the peek's
/// `remaining` must cover it; a cost of 0 fits when the peek itself was allowed.
pub fn fits(peek: &Outcome, cost: u64) -> bool {
    if cost == 0 {
        peek.allowed
    } else {
        peek.remaining >= cost
    }
}

/// Decides `items` all-or-nothing, exactly as the script does (see the module docs). With
/// `commit` false it is a dry run: every rule is decided, nothing is consumed, and `allowed`
/// says whether the request would have been admitted.
pub fn decide(items: &mut [RuleOnState<'_>], commit: bool) -> RulesOutcome {
    // A blocked rule's peek reports nothing remaining: it fits no cost.
    let peeks: Vec<Outcome> =
        items.iter_mut().map(|i| guarded(i.algorithm, i.quota, i.state, i.block, i.now_ms, 0)).collect();
    let fit: Vec<bool> = items.iter().zip(&peeks).map(|(i, p)| fits(p, i.cost)).collect();
    let all_fit = items.iter().zip(&fit).all(|(i, &f)| f || i.shadow);
    let mut allowed = all_fit;
    let take = commit && all_fit;
    let outcomes = items
        .iter_mut()
        .zip(peeks.into_iter().zip(fit))
        .map(|(i, (peek, fit))| {
            if i.cost == 0 || (fit && !take) {
                return ItemOutcome { outcome: peek, consumed: false };
            }
            let outcome = guarded(i.algorithm, i.quota, i.state, i.block, i.now_ms, i.cost);
            // By the peek fact a fitting rule admits; should it not, the request is denied
            // rather than served past a limit (the property suites would show it).
            if fit && !outcome.allowed && !i.shadow {
                allowed = false;
            }
            ItemOutcome { outcome, consumed: fit && outcome.allowed }
        })
        .collect();
    RulesOutcome { allowed, items: outcomes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::step;

    /// A small deterministic generator (the library takes no rand): xorshift64*.
    struct Gen(u64);
    impl Gen {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % below.max(1)
        }
    }

    fn quotas() -> Vec<(Algorithm, Quota)> {
        let mut out = Vec::new();
        for a in Algorithm::ALL {
            for q in [
                Quota::new(3, std::time::Duration::from_secs(1)),
                Quota::new(7, std::time::Duration::from_millis(250)).with_burst(4),
                Quota::new(2, std::time::Duration::from_secs(5)).with_burst(5),
            ] {
                if q.validate(a).is_ok() {
                    out.push((a, q));
                }
            }
        }
        out
    }

    /// The fact the script relies on: for every algorithm, in every state a schedule can
    /// reach (clocks stepping back included), cost `c >= 1` is admitted exactly when a peek
    /// at the same moment reports `remaining >= c`.
    #[test]
    fn a_peek_tells_exactly_which_costs_fit_for_every_algorithm() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        let mut checked = 0;
        for (algorithm, quota) in quotas() {
            let capacity = quota.capacity(algorithm);
            let mut state = None;
            let mut now = 10_000u64;
            for _ in 0..3_000 {
                // Mostly forward, sometimes back (skewed clocks), sometimes a long idle.
                now = match g.next(20) {
                    0 => now.saturating_sub(g.next(800)),
                    1 => now + g.next(20_000),
                    _ => now + g.next(300),
                };
                let peek = step(algorithm, &quota, &mut state.clone(), now, 0);
                for c in 1..=capacity {
                    let alone = step(algorithm, &quota, &mut state.clone(), now, c);
                    assert_eq!(
                        alone.allowed,
                        peek.remaining >= c,
                        "{algorithm} {quota:?} at {now}: peek {peek:?}, cost {c} answered {alone:?}"
                    );
                    checked += 1;
                }
                let cost = g.next(capacity + 1);
                step(algorithm, &quota, &mut state, now, cost);
            }
        }
        assert!(checked > 50_000, "{checked}");
    }

    /// The definition the batch must meet, written without the peek fact: try every rule on
    /// a copy of its state; keep the copies only if every enforced rule admitted.
    fn by_definition(items: &mut [RuleOnState<'_>]) -> (bool, Vec<bool>) {
        let mut trial: Vec<Option<State>> = items.iter().map(|i| i.state.clone()).collect();
        let alone: Vec<bool> = items
            .iter()
            .zip(&mut trial)
            .map(|(i, s)| step(i.algorithm, i.quota, s, i.now_ms, i.cost).allowed)
            .collect();
        let all = items.iter().zip(&alone).all(|(i, &ok)| ok || i.shadow);
        (all, alone)
    }

    #[test]
    fn the_batch_consumes_all_or_nothing_as_the_definition_says() {
        let rules = quotas();
        let mut g = Gen(42);
        let mut mixed = 0;
        for round in 0..200 {
            // Three to five rules of any algorithm, one of them sometimes a shadow.
            let n = 3 + g.next(3) as usize;
            let picked: Vec<(Algorithm, Quota, bool)> = (0..n)
                .map(|k| {
                    let (a, q) = rules[g.next(rules.len() as u64) as usize];
                    (a, q, k == 0 && round % 3 == 0)
                })
                .collect();
            let mut states: Vec<Option<State>> = vec![None; n];
            let mut now = 1_000_000u64;
            for _ in 0..200 {
                now += g.next(400);
                let costs: Vec<u64> = picked.iter().map(|(a, q, _)| g.next(q.capacity(*a) + 1).min(2)).collect();
                let mut copies = states.clone();
                let (want, alone) = {
                    let mut items: Vec<RuleOnState<'_>> = picked
                        .iter()
                        .zip(&mut copies)
                        .zip(&costs)
                        .map(|((&(algorithm, ref quota, shadow), state), &cost)| RuleOnState {
                            algorithm,
                            quota,
                            state,
                            now_ms: now,
                            cost,
                            shadow,
                            block: None,
                        })
                        .collect();
                    by_definition(&mut items)
                };
                let before = states.clone();
                let mut dry_states = states.clone();
                let dry = {
                    let mut items: Vec<RuleOnState<'_>> = picked
                        .iter()
                        .zip(&mut dry_states)
                        .zip(&costs)
                        .map(|((&(algorithm, ref quota, shadow), state), &cost)| RuleOnState {
                            algorithm,
                            quota,
                            state,
                            now_ms: now,
                            cost,
                            shadow,
                            block: None,
                        })
                        .collect();
                    decide(&mut items, false)
                };
                // A dry run tells the same answers and consumes nothing.
                assert_eq!(dry.allowed, want);
                assert!(dry.items.iter().zip(&alone).all(|(i, &ok)| !i.consumed && i.outcome.allowed == ok), "{dry:?}");
                let got = {
                    let mut items: Vec<RuleOnState<'_>> = picked
                        .iter()
                        .zip(&mut states)
                        .zip(&costs)
                        .map(|((&(algorithm, ref quota, shadow), state), &cost)| RuleOnState {
                            algorithm,
                            quota,
                            state,
                            now_ms: now,
                            cost,
                            shadow,
                            block: None,
                        })
                        .collect();
                    decide(&mut items, true)
                };
                assert_eq!(got.allowed, want, "round {round} at {now}: {got:?} vs rules alone {alone:?}");
                for (k, item) in got.items.iter().enumerate() {
                    assert_eq!(item.outcome.allowed, alone[k], "rule {k}: {item:?}");
                    // Consumed exactly when the request went through (or a fitting shadow
                    // rule rode along with it) and the rule admits a real cost.
                    let should = costs[k] > 0 && alone[k] && want;
                    assert_eq!(item.consumed, should, "rule {k} at {now}: {item:?}, costs {costs:?}");
                    if !item.consumed {
                        // Nothing consumed: the state decides as before (a peek may only
                        // have dropped what had expired).
                        let mut a = before[k].clone();
                        let mut b = states[k].clone();
                        let (alg, q, _) = picked[k];
                        assert_eq!(step(alg, &q, &mut a, now, 0), step(alg, &q, &mut b, now, 0));
                    }
                }
                mixed += (!got.allowed && got.items.iter().any(|i| i.outcome.allowed)) as u32;
            }
        }
        // The interesting case happened: some rule would have admitted a request another denied.
        assert!(mixed > 100, "{mixed}");
    }
}
