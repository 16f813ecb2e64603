//! Which algorithms a results file holds, in the order every chart and table lists them, and
//! the colour each is drawn in.
//!
//! The built-in algorithms come from the limiter's one list, [`Algorithm::ALL`], by position:
//! one algorithm keeps its place and colour in every chart whatever subset a run holds.
//! *External* subjects (limiters that are not the library's, run to show how they fail) follow,
//! in the order they first appear in the results, coloured from their own palette. A name is
//! external when a run says so (`library: false`) or when it is no built-in algorithm at all:
//! a subject loaded from a user's file can have any name. In the simulator's catalogue order
//! the first external subject is ADR-002's bucket (black) and the second the naive counter
//! (vermillion, the orange the README's chart text names).

use plotters::style::RGBColor;
use redis_ratelimit::Algorithm;

use crate::schema::Results;
use crate::style::{GREY, INK, OI_BLUE, OI_GREEN, OI_ORANGE, OI_PURPLE, OI_SKY, OI_VERMILLION};

/// Colours of the built-in algorithms, by position in [`Algorithm::ALL`] (cycled).
const BUILT_IN: [RGBColor; Algorithm::ALL.len()] = [OI_ORANGE, OI_SKY, OI_GREEN, OI_BLUE, OI_PURPLE];

/// Colours of the external subjects, by order of first appearance (cycled). Dark and saturated, apart
/// from the built-ins' Okabe & Ito hues.
const EXTERNAL: [RGBColor; 5] = [INK, OI_VERMILLION, GREY, RGBColor(0x8C, 0x51, 0x0A), RGBColor(0x76, 0x2A, 0x83)];

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    external: bool,
    color: RGBColor,
}

/// The algorithms of one results file, in display order.
#[derive(Debug, Clone)]
pub(crate) struct Lineup {
    entries: Vec<Entry>,
}

impl Lineup {
    /// Every subject named anywhere in `r` (runs, the race and skew sweeps, then the verified
    /// subjects).
    pub(crate) fn of(r: &Results) -> Self {
        let flagged = |name: &str| r.results.iter().any(|x| x.subject == name && !x.library);
        let built_in: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
        let mut entries: Vec<Entry> = built_in
            .iter()
            .enumerate()
            .filter(|(_, name)| !flagged(name))
            .map(|(i, name)| Entry { name: name.to_string(), external: false, color: BUILT_IN[i % BUILT_IN.len()] })
            .collect();
        let named = r
            .results
            .iter()
            .map(|x| x.subject.as_str())
            .chain(r.race_sweep.iter().map(|p| p.subject.as_str()))
            .chain(r.skew_sweep.iter().map(|p| p.subject.as_str()))
            .chain(r.verify.iter().map(|s| s.name.as_str()));
        let mut external = 0;
        // Some of the library's own entries are no single algorithm (the enforcement point of
        // the multi-rule scenario): its runs say `library: true`, and it is not external.
        let library = |name: &str| r.results.iter().any(|x| x.subject == name && x.library);
        for name in named {
            if entries.iter().any(|e| e.name == name) {
                continue;
            }
            let color = EXTERNAL[external % EXTERNAL.len()];
            external += 1;
            entries.push(Entry { name: name.to_string(), external: !library(name), color });
        }
        Lineup { entries }
    }

    /// `names` without repeats, in display order. Every name of the results file is in the
    /// lineup; any other comes last, in first-seen order.
    pub(crate) fn order<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut seen: Vec<&str> = Vec::new();
        for n in names {
            if !seen.contains(&n) {
                seen.push(n);
            }
        }
        let position = |n: &str| self.entries.iter().position(|e| e.name == n).unwrap_or(usize::MAX);
        seen.sort_by_key(|n| position(n));
        seen.into_iter().map(str::to_string).collect()
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The algorithm's colour in every chart.
    pub(crate) fn color(&self, name: &str) -> RGBColor {
        self.entry(name).map_or(GREY, |e| e.color)
    }

    /// Whether the subject is external (not the library's: its broken bound is the finding).
    pub(crate) fn is_external(&self, name: &str) -> bool {
        self.entry(name).is_none_or(|e| e.external)
    }

    /// The name as legends and row labels show it: "naive (external)" for an external subject.
    pub(crate) fn label(&self, name: &str) -> String {
        if self.is_external(name) {
            format!("{name} (external)")
        } else {
            name.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{RacePoint, RunResult};

    fn run(subject: &str, external: bool) -> RunResult {
        RunResult { subject: subject.into(), library: !external, ..RunResult::default() }
    }

    fn built_in(i: usize) -> String {
        Algorithm::ALL[i].name().to_string()
    }

    #[test]
    fn built_ins_keep_their_place_and_colour_whatever_the_results_hold() {
        let (first, third) = (built_in(0), built_in(2));
        let only_third = Lineup::of(&Results { results: vec![run(&third, false)], ..Results::default() });
        let both = Lineup::of(&Results { results: vec![run(&third, false), run(&first, false)], ..Results::default() });
        assert_eq!(both.order([third.as_str(), first.as_str()]), [first.clone(), third.clone()]);
        assert_eq!(only_third.color(&third), both.color(&third));
        assert_ne!(both.color(&first), both.color(&third));
        assert!(!both.is_external(&first));
    }

    #[test]
    fn a_library_entry_that_is_no_algorithm_is_not_external() {
        let r = Results { results: vec![run("rules", false), run("rules-per-slot", true)], ..Results::default() };
        let lineup = Lineup::of(&r);
        assert_eq!(
            (lineup.label("rules"), lineup.label("rules-per-slot")),
            ("rules".into(), "rules-per-slot (external)".into())
        );
    }

    #[test]
    fn external_subjects_follow_in_order_of_first_appearance_black_then_vermillion() {
        let r = Results {
            results: vec![run("my-bucket", true), run(&built_in(0), false), run("naive-copy", true)],
            race_sweep: vec![RacePoint { subject: "from-a-file".into(), ..RacePoint::default() }],
            ..Results::default()
        };
        let lineup = Lineup::of(&r);
        let order = lineup.order(["from-a-file", "naive-copy", "my-bucket", &built_in(0)]);
        assert_eq!(order, [built_in(0).as_str(), "my-bucket", "naive-copy", "from-a-file"]);
        assert_eq!((lineup.color("my-bucket"), lineup.color("naive-copy")), (INK, OI_VERMILLION));
        // A name no run flags but that is no built-in algorithm is external too.
        assert!(lineup.is_external("from-a-file"));
        assert_eq!(lineup.label("my-bucket"), "my-bucket (external)");
        assert_eq!(lineup.label(&built_in(0)), built_in(0));
    }

    #[test]
    fn a_built_in_name_that_a_run_flags_as_external_is_listed_and_coloured_as_one() {
        // A built-in name whose runs say it is not the library's is drawn as external.
        let last = built_in(Algorithm::ALL.len() - 1);
        let r = Results { results: vec![run(&last, true), run(&built_in(0), false)], ..Results::default() };
        let lineup = Lineup::of(&r);
        assert!(lineup.is_external(&last));
        assert_eq!(lineup.color(&last), INK);
        assert_eq!(lineup.order([last.as_str(), &built_in(1), &built_in(0)]), [built_in(0), built_in(1), last]);
    }
}
