//! The corpus: subject files written in the styles of public limiter scripts (token buckets on
//! the caller's clock and on Redis's, GCRA, INCR+EXPIRE windows, sorted-set and list logs,
//! periodic and whole-second refills, late callers' times written back, windows any caller
//! resets), correct ones and broken ones, in `sim/subjects/corpus/`, each with the verdicts a
//! careful reading gives it (`expected.toml`, with the reading in `why`). Pinned here: every
//! correct one holds every promise, every broken one breaks exactly what its flaw breaks, on
//! two seeds; every verdict agrees with the subject's own profile; every printed replay
//! reproduces its finding.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use results::{SubjectReport, Verdict};
use sim_engine::run::Campaign;
use sim_engine::subject::SubjectFile;
use sim_verify as verify;
use sim_verify::checks::CheckKind;
use sim_verify::schedule::Schedule;

use crate::support::on_two_threads;

/// Schedules per check and quota: what every flaw of the corpus needs to be found on both
/// seeds, with the optimizing search on top.
const CASES: u32 = 64;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("subjects/corpus")
}

fn load(name: &str) -> Arc<SubjectFile> {
    let file = SubjectFile::load(&dir().join(format!("{name}.toml"))).and_then(verify::preflight);
    Arc::new(file.unwrap_or_else(|e| panic!("{name}: {e}")))
}

/// The expected verdict of each check, by the names the verdicts use.
fn expectations() -> Vec<(String, Vec<(&'static str, Verdict)>)> {
    let text = std::fs::read_to_string(dir().join("expected.toml")).expect("expected.toml");
    let table: toml::Table = toml::from_str(&text).expect("expected.toml is TOML");
    let checks = [
        ("bound", "bound"),
        ("clock_trust", "clock trust"),
        ("lost_capacity", "no lost capacity"),
        ("estimate", "sliding-window estimate"),
        ("retry_after", "retry-after honest"),
        ("errors", "runs without errors"),
    ];
    table
        .into_iter()
        .map(|(name, entry)| {
            let expected = checks
                .iter()
                .map(|&(key, check)| {
                    let word = entry.get(key).map_or(Verdict::NotApplicable, |v| {
                        v.clone().try_into().unwrap_or_else(|e| panic!("expected.toml: {name}.{key}: {e}"))
                    });
                    (check, word)
                })
                .collect();
            (name, expected)
        })
        .collect()
}

/// The verdict each check got (`n/a` for a check that does not apply).
fn got(r: &SubjectReport, check: &str) -> Verdict {
    r.verdicts.iter().find(|v| v.check == check).map_or(Verdict::NotApplicable, |v| v.verdict)
}

#[test]
fn every_corpus_subject_gets_the_verdicts_of_a_careful_reading_on_two_seeds_and_replays_its_findings() {
    let expected = expectations();
    assert!(expected.len() >= 20, "the corpus has {} subjects", expected.len());
    let runs: Vec<(String, u64)> = expected.iter().flat_map(|(n, _)| [(n.clone(), 1), (n.clone(), 2)]).collect();
    let reports =
        on_two_threads(&runs, |(name, seed)| verify::report(&load(name), &Campaign::default(), CASES, *seed, "model"));
    let mut wrong = Vec::new();
    let mut replayed = 0;
    for ((name, seed), r) in runs.iter().zip(&reports) {
        let (_, checks) = expected.iter().find(|(n, _)| n == name).expect("listed");
        for (check, want) in checks {
            let verdict = got(r, check);
            if &verdict != want {
                let v = r.verdicts.iter().find(|v| v.check == *check);
                wrong.push(format!(
                    "{name} (seed {seed}): {check} is {verdict}, a careful reading says {want}: {}\n    {}",
                    v.map_or("", |v| v.detail.as_str()),
                    v.map_or("", |v| v.replay.as_str())
                ));
            }
        }
        // A verdict and the profile agree: a subject that delivers less than an exact limiter
        // from the same requests has lost capacity somewhere.
        let p = &r.profile;
        let short = p
            .rate_curve
            .iter()
            .zip(&p.exact_curve)
            .any(|(got, exact)| got.delivered < exact.delivered * (1.0 - verify::profile::SHORTFALL));
        if short && got(r, "no lost capacity") == Verdict::Held {
            wrong.push(format!(
                "{name} (seed {seed}): delivers {:?} where an exact limiter delivers {:?}, yet no lost capacity held",
                p.rate_curve, p.exact_curve
            ));
        }
        // Every printed replay, run as printed, breaks the same check with the same words.
        for v in r.verdicts.iter().filter(|v| v.verdict == Verdict::Broken) {
            match replays(name, v) {
                Ok(()) => replayed += 1,
                Err(why) => wrong.push(format!("{name} (seed {seed}): {}: {why}", v.check)),
            }
        }
    }
    let breaks = expected.iter().flat_map(|(_, c)| c.iter()).filter(|(_, w)| *w == Verdict::Broken).count();
    println!(
        "corpus: {} subjects x 2 seeds, {} verdicts as a careful reading gives them; {replayed} printed replays \
         reproduced their finding",
        expected.len(),
        runs.len() * 6
    );
    assert!(wrong.is_empty(), "{} disagreement(s):\n{}", wrong.len(), wrong.join("\n"));
    assert_eq!(replayed, 2 * breaks, "a replay for every break on both seeds");
}

/// Whether the replay `v` prints, run as printed, shows the same finding.
fn replays(name: &str, v: &results::VerdictLine) -> Result<(), String> {
    let (quota, schedule) = v
        .replay
        .split_once(" --quota ")
        .and_then(|(_, rest)| rest.split_once(" --replay "))
        .ok_or_else(|| format!("no search replay: {}", v.replay))?;
    let q: Vec<u64> =
        quota.split('/').map(|n| n.parse().map_err(|_| format!("{quota:?}"))).collect::<Result<_, _>>()?;
    let quota = redis_ratelimit::Quota::new(q[0], Duration::from_millis(q[1])).with_burst(q[2]);
    let file = load(name);
    let held = verify::held(&file, quota);
    let kind = CheckKind::ALL.into_iter().find(|k| k.name() == v.check).ok_or("no such check")?;
    let schedule = Schedule::parse(schedule.trim_matches('"'))?;
    let (violation, _) = sim_verify::search::judge(&file, &held, kind, &schedule).ok_or("the replay breaks nothing")?;
    if v.detail.starts_with(&violation.message) {
        Ok(())
    } else {
        Err(format!("printed: {}\nreplayed: {}", v.detail, violation.message))
    }
}
