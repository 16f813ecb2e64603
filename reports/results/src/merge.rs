//! Several results files as one: the shards of one sweep (`cargo xtask simulate --shard I/N`
//! on several machines), or runs made apart, for one report (`cargo xtask report --from a.json
//! --from b.json`).
//!
//! Shards of one sweep (every file says `I/N` with the same N, each I once) are put back in
//! the order the unsharded sweep would have written: shard I ran runs I-1, I-1+N, I-1+2N...
//! of the sweep, so interleaving them restores its order, and with it the same tables, the
//! same report and the same trace hash over all runs. Other files are concatenated in the
//! order given. Files must agree on the schema, the backend and the run duration: a report
//! of runs that are not comparable would compare them anyway.

use crate::schema::{Results, SCHEMA};

/// Merges `files` (name, contents) into one; the error names the file that does not fit.
pub fn merge(files: Vec<(String, Results)>) -> Result<Results, String> {
    let Some((first_name, first)) = files.first() else { return Err("no results files to merge".into()) };
    if files.len() == 1 {
        return Ok(first.clone());
    }
    for (name, r) in &files {
        if r.schema != SCHEMA {
            return Err(format!("{name}: schema {:?}, not {SCHEMA:?}", r.schema));
        }
        if r.backend != first.backend {
            return Err(format!("{name}: backend {:?}, but {first_name} ran on {:?}", r.backend, first.backend));
        }
        if r.duration_ms != first.duration_ms {
            return Err(format!(
                "{name}: {} ms per run, but {first_name} ran {} ms: runs of different lengths do not merge",
                r.duration_ms, first.duration_ms
            ));
        }
    }
    let shards = shards_of_one_sweep(&files)?;
    let mut out = Results {
        schema: SCHEMA.to_owned(),
        command: files.iter().map(|(_, r)| r.command.as_str()).collect::<Vec<_>>().join(" + "),
        backend: first.backend.clone(),
        duration_ms: first.duration_ms,
        ..Results::default()
    };
    match shards {
        Some(order) => {
            // order[i] is the file holding shard i + 1.
            let lists: Vec<&Vec<_>> = order.iter().map(|&f| &files[f].1.results).collect();
            let longest = lists.iter().map(|l| l.len()).max().unwrap_or(0);
            for round in 0..longest {
                for list in &lists {
                    if let Some(r) = list.get(round) {
                        out.results.push(r.clone());
                    }
                }
            }
        }
        None => out.results = files.iter().flat_map(|(_, r)| r.results.iter().cloned()).collect(),
    }
    for (_, r) in &files {
        out.race_sweep.extend(r.race_sweep.iter().cloned());
        out.skew_sweep.extend(r.skew_sweep.iter().cloned());
        out.verify.extend(r.verify.iter().cloned());
        out.seeds.extend(r.seeds.iter().copied());
    }
    out.seeds.sort_unstable();
    out.seeds.dedup();
    Ok(out)
}

/// When every file is a shard `I/N` of one N, each I once and all of them there: the file of
/// each shard in shard order. A file that is not a shard makes it a plain concatenation; a
/// shard named twice, or shards of different N, are refused.
fn shards_of_one_sweep(files: &[(String, Results)]) -> Result<Option<Vec<usize>>, String> {
    let parsed: Vec<Option<(u32, u32)>> = files.iter().map(|(_, r)| parse_shard(&r.shard)).collect();
    if parsed.iter().any(Option::is_none) {
        return Ok(None);
    }
    let parsed: Vec<(u32, u32)> = parsed.into_iter().flatten().collect();
    let n = parsed[0].1;
    if let Some(((name, r), _)) = files.iter().zip(&parsed).find(|(_, (_, m))| *m != n) {
        return Err(format!("{name}: shard {} of another split than {}'s /{n}", r.shard, files[0].0));
    }
    let mut order: Vec<Option<usize>> = vec![None; n as usize];
    for (f, (i, _)) in parsed.iter().enumerate() {
        let slot = &mut order[(*i - 1) as usize];
        if let Some(other) = *slot {
            return Err(format!("{} and {} are both shard {i}/{n}", files[other].0, files[f].0));
        }
        *slot = Some(f);
    }
    Ok(if order.iter().all(Option::is_some) { Some(order.into_iter().flatten().collect()) } else { None })
}

/// `I/N` with 1 <= I <= N.
pub fn parse_shard(text: &str) -> Option<(u32, u32)> {
    let (i, n) = text.split_once('/')?;
    let (i, n): (u32, u32) = (i.trim().parse().ok()?, n.trim().parse().ok()?);
    (1..=n).contains(&i).then_some((i, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::RunResult;

    fn file(shard: &str, seeds: &[u64]) -> (String, Results) {
        let results = seeds.iter().map(|&seed| RunResult { seed, ..RunResult::default() }).collect();
        let r = Results {
            schema: SCHEMA.into(),
            backend: "model".into(),
            duration_ms: 100,
            seeds: seeds.to_vec(),
            results,
            shard: shard.into(),
            ..Results::default()
        };
        (format!("{shard}.json"), r)
    }

    #[test]
    fn shards_interleave_back_into_the_sweep_s_order() {
        // Runs 0..5 split in 2: shard 1 ran 0, 2, 4; shard 2 ran 1, 3.
        let merged = merge(vec![file("2/2", &[1, 3]), file("1/2", &[0, 2, 4])]).expect("merges");
        assert_eq!(merged.results.iter().map(|r| r.seed).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        assert_eq!(merged.seeds, [0, 1, 2, 3, 4]);
        // Not shards: concatenated as given.
        let plain = merge(vec![file("", &[5]), file("", &[1])]).expect("merges");
        assert_eq!(plain.results.iter().map(|r| r.seed).collect::<Vec<_>>(), [5, 1]);
    }

    #[test]
    fn files_that_do_not_fit_are_refused_by_name() {
        let e = merge(vec![file("1/2", &[0]), file("1/2", &[1])]).expect_err("twice");
        assert!(e.contains("both shard 1/2"), "{e}");
        let e = merge(vec![file("1/2", &[0]), file("2/3", &[1])]).expect_err("other split");
        assert!(e.contains("2/3.json") && e.contains("/2"), "{e}");
        let mut other = file("", &[1]);
        other.1.backend = "redis".into();
        let e = merge(vec![file("", &[0]), other]).expect_err("backend");
        assert!(e.contains("backend \"redis\""), "{e}");
        assert!(merge(Vec::new()).is_err());
        assert_eq!(parse_shard("0/2"), None);
        assert_eq!(parse_shard("3/2"), None);
        assert_eq!(parse_shard("2/2"), Some((2, 2)));
    }
}
