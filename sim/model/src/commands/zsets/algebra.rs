//! ZUNION, ZINTER, ZDIFF, their STORE variants and ZINTERCARD (`zunionInterDiffGenericCommand`).
//!
//! Inputs may be sorted sets or plain sets (whose members score 1). Redis sorts the inputs of a
//! union or intersection by size before combining them (a stable sort for the few inputs a
//! command names), and the order matters to a client: scores are combined input by input, and
//! `inf + -inf` in the middle of a sum is 0 where at the end it would not be. The model
//! combines in the same order, with the same rules (a weighted score that is NaN counts as 0, a
//! sum that becomes NaN is 0).

use bytes::Bytes;
use indexmap::IndexMap;

use super::super::super::keyspace::{Set, Value, ZSet};
use super::super::super::num::{parse_f64_strict, parse_i64};
use super::super::super::resp::Reply;
use super::super::{is, not_an_integer, syntax_error, wrong_type, Ctx};
use super::emit;

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// `zunionInterAggregate`.
    fn apply(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// One input: a sorted set, a set (every member scoring 1), or a missing key (empty).
enum Source {
    Missing,
    Sorted(ZSet),
    Plain(Set),
}

impl Source {
    fn len(&self) -> usize {
        match self {
            Source::Missing => 0,
            Source::Sorted(z) => z.len(),
            Source::Plain(s) => s.len(),
        }
    }

    /// Members and scores in the order Redis iterates them.
    fn items(&self) -> Vec<(Bytes, f64)> {
        match self {
            Source::Missing => Vec::new(),
            Source::Sorted(z) => z.iter().map(|(m, s)| (m.clone(), s)).collect(),
            Source::Plain(s) => s.members().into_iter().map(|m| (m, 1.0)).collect(),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::Sorted(z) => z.score(member),
            Source::Plain(s) => s.contains(member).then_some(1.0),
        }
    }
}

/// What a command does with the result.
#[derive(Clone, Copy)]
enum Output<'a> {
    Reply,
    Store(&'a [u8]),
    Cardinality,
}

/// The parsed command: inputs with their weights, the aggregate, and the options.
struct Plan {
    sources: Vec<(Source, f64)>,
    aggregate: Aggregate,
    with_scores: bool,
    limit: usize,
}

/// numkeys (at `args[at]`), the keys (each read now: WRONGTYPE before any option is looked at),
/// then WEIGHTS and AGGREGATE (not for ZDIFF nor ZINTERCARD), WITHSCORES (not for the STORE
/// variants nor ZINTERCARD), LIMIT (ZINTERCARD only).
fn parse(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    at: usize,
    op: SetOp,
    output: Output<'_>,
    name: &str,
) -> Result<Plan, Reply> {
    let setnum = parse_i64(args[at]).ok_or_else(not_an_integer)?;
    if setnum < 1 {
        return Err(Reply::error(format!("ERR at least 1 input key is needed for '{name}' command")));
    }
    if setnum as u64 > (args.len() - at - 1) as u64 {
        return Err(syntax_error());
    }
    let setnum = setnum as usize;
    let mut sources = Vec::with_capacity(setnum);
    for key in &args[at + 1..at + 1 + setnum] {
        let source = match ctx.db.keys.get(key, ctx.now_ms).map(|e| &e.value) {
            None => Source::Missing,
            Some(Value::ZSet(z)) => Source::Sorted(z.clone()),
            Some(Value::Set(s)) => Source::Plain(s.clone()),
            Some(_) => return Err(wrong_type()),
        };
        sources.push((source, 1.0));
    }
    let cardinality = matches!(output, Output::Cardinality);
    let combines = op != SetOp::Diff && !cardinality;
    let mut plan = Plan { sources, aggregate: Aggregate::Sum, with_scores: false, limit: 0 };
    let mut j = at + 1 + setnum;
    while j < args.len() {
        let remaining = args.len() - j;
        if combines && remaining > setnum && is(args[j], "weights") {
            for (k, (_, weight)) in plan.sources.iter_mut().enumerate() {
                *weight =
                    parse_f64_strict(args[j + 1 + k]).ok_or_else(|| Reply::err("ERR weight value is not a float"))?;
            }
            j += 1 + setnum;
        } else if combines && remaining >= 2 && is(args[j], "aggregate") {
            let word = args[j + 1];
            plan.aggregate = if is(word, "sum") {
                Aggregate::Sum
            } else if is(word, "min") {
                Aggregate::Min
            } else if is(word, "max") {
                Aggregate::Max
            } else {
                return Err(syntax_error());
            };
            j += 2;
        } else if matches!(output, Output::Reply) && is(args[j], "withscores") {
            plan.with_scores = true;
            j += 1;
        } else if cardinality && remaining >= 2 && is(args[j], "limit") {
            plan.limit = match parse_i64(args[j + 1]) {
                Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(Reply::err("ERR LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(syntax_error());
        }
    }
    if op != SetOp::Diff {
        plan.sources.sort_by_key(|(s, _)| s.len());
    }
    Ok(plan)
}

/// The members of the result with their scores (in no particular order).
fn combine(plan: &Plan, op: SetOp, stop_at: usize) -> Vec<(Bytes, f64)> {
    let agg = plan.aggregate;
    match op {
        SetOp::Inter => {
            let Some(((first, w0), rest)) = plan.sources.split_first() else { return Vec::new() };
            let mut out = Vec::new();
            for (member, score) in first.items() {
                let mut total = w0 * score;
                if total.is_nan() {
                    total = 0.0;
                }
                let in_all = rest.iter().all(|(source, weight)| match source.score(&member) {
                    Some(s) => {
                        agg.apply(&mut total, s * weight);
                        true
                    }
                    None => false,
                });
                if in_all {
                    out.push((member, total));
                    if out.len() >= stop_at {
                        break;
                    }
                }
            }
            out
        }
        SetOp::Union => {
            let mut acc: IndexMap<Bytes, f64> = IndexMap::new();
            for (source, weight) in &plan.sources {
                for (member, score) in source.items() {
                    let mut weighted = weight * score;
                    if weighted.is_nan() {
                        weighted = 0.0;
                    }
                    match acc.get_mut(&member) {
                        Some(total) => agg.apply(total, weighted),
                        None => {
                            acc.insert(member, weighted);
                        }
                    }
                }
            }
            acc.into_iter().collect()
        }
        SetOp::Diff => {
            let Some(((first, _), rest)) = plan.sources.split_first() else { return Vec::new() };
            first.items().into_iter().filter(|(m, _)| rest.iter().all(|(s, _)| s.score(m).is_none())).collect()
        }
    }
}

fn generic(ctx: &mut Ctx<'_>, args: &[&[u8]], at: usize, op: SetOp, output: Output<'_>, name: &str) -> Reply {
    let plan = match parse(ctx, args, at, op, output, name) {
        Ok(plan) => plan,
        Err(e) => return e,
    };
    let stop_at = match output {
        Output::Cardinality if plan.limit > 0 => plan.limit,
        _ => usize::MAX,
    };
    let mut result = combine(&plan, op, stop_at);
    match output {
        Output::Cardinality => Reply::Integer(result.len() as i64),
        Output::Store(dst) if result.is_empty() => {
            ctx.db.keys.remove(dst);
            Reply::Integer(0)
        }
        Output::Store(dst) => {
            let len = result.len() as i64;
            ctx.store(dst, Value::ZSet(ZSet::from_result(result)), false);
            Reply::Integer(len)
        }
        Output::Reply => {
            // The skiplist's order: by score (-0 ties with 0), then member.
            result
                .sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.0.cmp(&b.0)));
            emit(ctx, result, plan.with_scores)
        }
    }
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
pub(in super::super) fn zunionstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    generic(ctx, args, 2, SetOp::Union, Output::Store(args[1]), "zunionstore")
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
pub(in super::super) fn zinterstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    generic(ctx, args, 2, SetOp::Inter, Output::Store(args[1]), "zinterstore")
}

/// ZDIFFSTORE destination numkeys key [key ...]
pub(in super::super) fn zdiffstore(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    generic(ctx, args, 2, SetOp::Diff, Output::Store(args[1]), "zdiffstore")
}

/// ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub(in super::super) fn zunion(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    generic(ctx, args, 1, SetOp::Union, Output::Reply, "zunion")
}

/// ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub(in super::super) fn zinter(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    generic(ctx, args, 1, SetOp::Inter, Output::Reply, "zinter")
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub(in super::super) fn zintercard(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    generic(ctx, args, 1, SetOp::Inter, Output::Cardinality, "zintercard")
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
pub(in super::super) fn zdiff(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    generic(ctx, args, 1, SetOp::Diff, Output::Reply, "zdiff")
}
