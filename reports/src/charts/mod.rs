//! One module per chart. Each writes one PNG, or a placeholder PNG that says which run would
//! fill it when the results hold no data for it. Shared drawing helpers live in [`draw`],
//! shared arithmetic on results in [`series`].

mod accuracy;
mod cost;
mod draw;
mod limits;
mod outage;
mod overlap;
mod race;
mod rate;
mod record;
mod scenario;
mod series;
mod skew;
mod witness;

pub(crate) use draw::ensure_fonts;
pub(crate) use limits::{is_in_flight, is_post_hoc};

use std::path::Path;

use crate::schema::Results;
use crate::style::ordered;
use crate::text_box::TextBox;

use self::accuracy::accuracy;
use self::cost::cost;
use self::draw::Drawn;
use self::outage::outage;
use self::race::race;
use self::rate::rate;
use self::scenario::scenario;
use self::skew::skew;
use self::witness::witness;
pub(crate) use self::witness::witnessed;

/// The scenario whose results feed the outage chart.
pub(crate) const OUTAGE_SCENARIO: &str = "redis-outage";

/// What a chart shows; the page places it by this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChartKind {
    Rate,
    Race,
    Scenario(String),
    Accuracy,
    Skew,
    Outage,
    Cost,
    /// A verified subject's break on a timeline: the subject's name and the check.
    Witness(String, String),
}

/// A chart written to the report directory.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    pub kind: ChartKind,
    /// File name inside the report directory (no directories, only `[a-z0-9.-]`).
    pub file: String,
    /// Alt text for the page.
    pub alt: String,
    /// True when the image only says that there was no data.
    pub placeholder: bool,
    /// Width and height in pixels.
    pub size: (u32, u32),
    /// Every text drawn on it, where its pixels landed.
    pub text: Vec<TextBox>,
}

/// Scenarios in the order they first appear in the results.
pub(crate) fn scenarios(r: &Results) -> Vec<String> {
    ordered(r.results.iter().map(|x| x.scenario.as_str()), &[])
}

/// The seed whose runs the over-time charts show: the first one listed.
pub(crate) fn first_seed(r: &Results) -> Option<u64> {
    r.seeds.first().copied().or_else(|| r.results.iter().map(|x| x.seed).min())
}

/// A file-name-safe form of a scenario name.
pub(crate) fn slug(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let s = s.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-");
    let s: String = s.chars().take(40).collect();
    if s.is_empty() {
        "unnamed".into()
    } else {
        s
    }
}

pub(crate) fn render_all(r: &Results, out: &Path) -> anyhow::Result<Vec<Chart>> {
    let mut charts = Vec::new();
    let mut add = |kind: ChartKind, file: String, alt: String, f: &dyn Fn(&Path) -> anyhow::Result<Drawn>| {
        let Drawn { placeholder, width, height, text } = f(&out.join(&file))?;
        charts.push(Chart { kind, file, alt, placeholder, size: (width, height), text });
        anyhow::Ok(())
    };
    // A verification's own charts first; a plain simulation has none, nor has a verification
    // of in-flight limits only, which have no rate to deliver.
    if r.verify.iter().any(|s| s.profile.in_flight_runs.is_empty()) {
        add(
            ChartKind::Rate,
            "rate.png".into(),
            "Delivered against offered rate, one curve per verified subject".into(),
            &|p| rate(r, p),
        )?;
    }
    for (i, s) in r.verify.iter().enumerate() {
        for (v, w) in witnessed(s) {
            add(
                ChartKind::Witness(s.name.clone(), v.check.clone()),
                format!("witness-{:02}-{}-{}.png", i + 1, slug(&s.name), slug(&v.check)),
                format!("The witness of {}'s {} on a timeline, against what its promise allows", s.name, v.check),
                &|p| witness(s, v, w, p),
            )?;
        }
    }
    add(
        ChartKind::Race,
        "race.png".into(),
        "GET+SET race: admitted divided by limit against instances and Redis latency".into(),
        &|p| race(r, p),
    )?;
    for (i, s) in scenarios(r).iter().enumerate() {
        let file = format!("scenario-{:02}-{}.png", i + 1, slug(s));
        let kind = ChartKind::Scenario(s.clone());
        if is_in_flight(r, s) {
            let alt =
                format!("Holders working at once against the in-flight limit in scenario {s}, one panel per subject");
            add(kind, file, alt, &|p| limits::held(r, s, p))?;
        } else if is_post_hoc(r, s) {
            let alt = format!("Units charged against what the promise allows in scenario {s}, one bar per subject");
            add(kind, file, alt, &|p| limits::charged(r, s, p))?;
        } else {
            let alt = format!("Admitted against the oracle over time in scenario {s}, one panel per algorithm");
            add(kind, file, alt, &|p| scenario(r, s, p))?;
        }
    }
    add(
        ChartKind::Accuracy,
        "accuracy.png".into(),
        "Accuracy matrix: wrongly allowed and wrongly limited requests per algorithm and scenario".into(),
        &|p| accuracy(r, p),
    )?;
    add(
        ChartKind::Skew,
        "skew.png".into(),
        "Clock skew: admitted divided by bound against skew, client time versus server time".into(),
        &|p| skew(r, p),
    )?;
    add(
        ChartKind::Outage,
        "outage.png".into(),
        "Admissions per second through a Redis outage, one line per failure policy".into(),
        &|p| outage(r, p),
    )?;
    add(
        ChartKind::Cost,
        "cost.png".into(),
        "Redis commands per request and memory bytes per key, per algorithm".into(),
        &|p| cost(r, p),
    )?;
    Ok(charts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_keeps_file_names_safe() {
        assert_eq!(slug("redis-outage"), "redis-outage");
        assert_eq!(slug("<script>alert(1)</script>"), "script-alert-1-script");
        assert_eq!(slug("../../etc"), "etc");
        assert_eq!(slug("???"), "unnamed");
    }
}
