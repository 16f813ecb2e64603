//! The report page: one self-contained HTML file, inline CSS, no JavaScript, images by relative
//! file name. Every string that comes from the results file goes through [`escape`].

mod verified;

use std::fmt::Write as _;

use results::verdict::{self, Check, Kind, Problem, RowVerdict};

use crate::charts::{first_seed, is_in_flight, is_post_hoc, scenarios, Chart, ChartKind, OUTAGE_SCENARIO};
use crate::lineup::Lineup;
use crate::schema::{is_failure, Results, RunResult, SCHEMA};
use crate::style::{ordered, tidy, POLICIES};

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const CSS: &str = r#"
:root { --ink: #1a1a1a; --muted: #5f5f5f; --rule: #d6d6d6; --broken: #d55e00; --broken-bg: #fbe3d2;
        --expected-bg: #f0f0f0; --code-bg: #f4f4f4; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.5;
       font-family: "DejaVu Sans", "Segoe UI", Helvetica, Arial, sans-serif; font-size: 16px; }
header, main, footer { max-width: 1320px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 24px; border-bottom: 1px solid var(--rule); }
h1 { font-size: 28px; margin: 0 0 12px; }
h2 { font-size: 22px; margin: 40px 0 8px; padding-top: 8px; border-top: 1px solid var(--rule); }
h3 { font-size: 17px; margin: 20px 0 6px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0 0 12px; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 14px; background: var(--code-bg);
       padding: 1px 4px; border-radius: 3px; overflow-wrap: anywhere; }
nav ol { columns: 3; margin: 8px 0 16px; padding-left: 24px; }
p.desc { font-size: 17px; margin: 4px 0 12px; }
p.how { background: #f7f9fb; border-left: 4px solid #0072b2; padding: 8px 12px; margin: 8px 0 12px; }
figure { margin: 8px 0 12px; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid var(--rule); }
figcaption { color: var(--muted); font-size: 14px; }
table { border-collapse: collapse; width: 100%; font-size: 14px; margin: 8px 0; }
caption { text-align: left; color: var(--muted); padding: 4px 0; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--rule); text-align: left; vertical-align: top; }
th { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.name { white-space: nowrap; }
tr.broken td { background: var(--broken-bg); }
tr.broken td:first-child { border-left: 5px solid var(--broken); }
tr.expected td { background: var(--expected-bg); }
tr.expected td:first-child { border-left: 5px solid #8a8a8a; }
.tag { display: inline-block; font-size: 12px; font-weight: bold; padding: 0 6px; border-radius: 3px; }
.tag.broken { background: var(--broken); color: #fff; }
.tag.expected { background: #6b6b6b; color: #fff; }
.tag.held { background: #009e73; color: #fff; }
.tag.none { background: #d6d6d6; color: var(--ink); }
span.check { color: var(--muted); font-size: 13px; }
ul.findings { padding-left: 20px; }
pre { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 13px; background: var(--code-bg);
      padding: 6px 8px; overflow-x: auto; margin: 6px 0; }
table.profile th { width: 14em; }
details { margin: 12px 0; }
details summary { cursor: pointer; font-weight: bold; }
ul.findings li { margin: 4px 0; }
.summary strong.bad { color: var(--broken); }
footer { color: var(--muted); font-size: 13px; border-top: 1px solid var(--rule); margin-top: 40px; padding: 12px 20px 32px; }
"#;

fn figure(out: &mut String, chart: &Chart) {
    let caption = if chart.placeholder {
        "<figcaption>This results file has no data for this chart; the image says which run fills it.</figcaption>"
    } else {
        ""
    };
    let _ =
        writeln!(out, "<figure><img src=\"{}\" alt=\"{}\">{caption}</figure>", escape(&chart.file), escape(&chart.alt));
}

fn how(out: &mut String, text: &str) {
    let _ = writeln!(out, "<p class=\"how\"><strong>How to read this.</strong> {}</p>", escape(text));
}

fn section_id(chart: &Chart) -> String {
    chart.file.trim_end_matches(".png").to_string()
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

fn pct(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() < 0.001 {
        "&lt;0.001".into()
    } else {
        format!("{v:.3}")
    }
}

/// The class of a verdict's tag and of its table row.
fn kind_class(kind: Kind) -> &'static str {
    match kind {
        Kind::Failure => "broken",
        Kind::Expected => "expected",
        Kind::Held => "held",
        Kind::Unchecked => "none",
    }
}

/// The verdict cell: the terminal table's words for the row ([`RowVerdict::text`]) in a tag,
/// then one line per check that broke, so bound, failure policy and liveness all show.
fn verdict_cell(v: &RowVerdict) -> String {
    let mut cell = format!("<span class=\"tag {}\">{}</span>", kind_class(v.kind()), escape(&v.text()));
    let n = v.runs;
    for (count, what) in
        [(v.bound_broken, "bound broken"), (v.policy_broken, "failure policy broken"), (v.starved, "a key starved")]
    {
        if count > 0 {
            let _ = write!(cell, "<br><span class=\"check\">{what} in {count} of {n} seed(s)</span>");
        }
    }
    if v.errors > 0 {
        let _ = write!(cell, "<br><span class=\"check\">{} call(s) returned an error</span>", v.errors);
    }
    cell
}

/// One table row: runs of one algorithm, round-trip mode, policy and time source, aggregated
/// over seeds.
fn table(out: &mut String, lineup: &Lineup, rows: &[&RunResult]) {
    let seeds = {
        let mut s: Vec<u64> = rows.iter().map(|x| x.seed).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    };
    let _ = writeln!(
        out,
        "<table>\n<caption>Mean per run over {seeds} seed(s); wrong allow/limit as % of all requests. The verdict \
         is the terminal table's: bound, failure policy and liveness.</caption>\n\
         <thead><tr><th>algorithm</th><th>mode</th><th>policy</th><th>clock</th><th>requests</th><th>admitted</th>\
         <th>oracle admitted</th><th>wrong allow %</th><th>wrong limit %</th><th>calls per decision</th>\
         <th>verdict</th><th>time to recover</th></tr></thead>\n<tbody>"
    );
    let algorithms = lineup.order(rows.iter().map(|x| x.subject.as_str()));
    let policies = ordered(rows.iter().map(|x| x.policy.as_str()), &POLICIES);
    let clocks = ordered(rows.iter().map(|x| x.time_source.as_str()), &["server", "client"]);
    let modes = ordered(rows.iter().map(|x| x.mode.as_str()), &["", "denial-cache", "lease", "batch"]);
    for a in &algorithms {
        for m in &modes {
            for p in &policies {
                for c in &clocks {
                    let group: Vec<&RunResult> = rows
                        .iter()
                        .filter(|x| &x.subject == a && &x.mode == m && &x.policy == p && &x.time_source == c)
                        .copied()
                        .collect();
                    if group.is_empty() {
                        continue;
                    }
                    let external = group.iter().any(|x| !x.library);
                    let verdict = RowVerdict::of(group.iter().copied());
                    let class = match verdict.kind() {
                        Kind::Failure => "broken",
                        Kind::Expected => "expected",
                        Kind::Held | Kind::Unchecked => "",
                    };
                    let recover: Vec<f64> = group.iter().filter_map(|x| x.recover_ms).map(|ms| ms as f64).collect();
                    let recover = if recover.is_empty() {
                        "—".to_string()
                    } else {
                        let worst = recover.iter().copied().fold(f64::MIN, f64::max);
                        format!("{} ms (worst of {})", tidy(worst), recover.len())
                    };
                    let name = if external { format!("{} (external)", escape(a)) } else { escape(a) };
                    let _ = writeln!(
                    out,
                    "<tr class=\"{class}\"><td class=\"name\">{name}</td><td class=\"name\">{}</td><td class=\"name\">{}</td>\
                     <td>{}</td><td class=\"num\">{:.0}</td>\
                     <td class=\"num\">{:.0}</td><td class=\"num\">{:.0}</td><td class=\"num\">{}</td>\
                     <td class=\"num\">{}</td><td class=\"num\">{:.3}</td><td class=\"verdict\">{}</td>\
                     <td class=\"name\">{recover}</td></tr>",
                    if m.is_empty() { "—".to_owned() } else { escape(m) },
                    escape(p),
                    escape(c),
                    mean(group.iter().map(|x| x.requests as f64)),
                    mean(group.iter().map(|x| x.admitted as f64)),
                    mean(group.iter().map(|x| x.oracle_admitted as f64)),
                    pct(mean(group.iter().map(|x| x.wrong_allow_pct))),
                    pct(mean(group.iter().map(|x| x.wrong_limit_pct))),
                    mean(group.iter().map(|x| x.round_trips_per_decision())),
                    verdict_cell(&verdict),
                );
                }
            }
        }
    }
    out.push_str("</tbody></table>\n");
}

fn replay_of(x: &RunResult) -> String {
    if x.replay.is_empty() {
        format!(
            "{} --scenario {} --subject {} --seed {}",
            results::command::command("simulate"),
            x.scenario,
            x.subject,
            x.seed
        )
    } else {
        x.replay.clone()
    }
}

/// One problem of a finding: a failure in capitals, an expected finding labelled as one.
fn problem_text(p: &Problem<'_>, errors: u64) -> String {
    let detail = if p.detail.is_empty() { String::new() } else { format!(": {}", escape(p.detail)) };
    match (p.check, p.failure) {
        (Check::Errors, _) => format!("<span class=\"tag broken\">ERRORS</span> {errors} call(s) returned an error"),
        (check, true) => format!("<span class=\"tag broken\">BROKEN</span> {}{detail}", check.name()),
        (check, false) => {
            format!("<span class=\"tag expected\">expected finding</span> {} broken{detail}", check.name())
        }
    }
}

fn finding_item(out: &mut String, x: &RunResult) {
    let mut problems: Vec<String> = verdict::problems(x).iter().map(|p| problem_text(p, x.errors)).collect();
    if let Some(redis) = x.redis.as_ref().filter(|r| r.keys_without_ttl > 0) {
        problems.push(escape(&format!(
            "{} key(s) left without a TTL, which never expire (e.g. {})",
            redis.keys_without_ttl,
            redis.keys_without_ttl_sample.join(", ")
        )));
    }
    let _ = writeln!(
        out,
        "<li><strong>{}</strong>{}, {}, {} time, seed {}: {}<br>replay: <code>{}</code></li>",
        escape(&x.subject),
        if x.mode.is_empty() { String::new() } else { format!(" ({})", escape(&x.mode)) },
        escape(&x.policy),
        escape(&x.time_source),
        x.seed,
        problems.join("; "),
        escape(&replay_of(x))
    );
}

/// Every run that broke a check (bound, failure policy, liveness) or returned errors, each
/// with its seed and replay command: the runs the terminal lists under its tables. Failures
/// are listed in full; a long list of expected findings folds into a `<details>`.
fn findings(out: &mut String, rows: &[&RunResult]) {
    let failures: Vec<&RunResult> = rows.iter().filter(|x| is_failure(x)).copied().collect();
    let expected: Vec<&RunResult> =
        rows.iter().filter(|x| !is_failure(x) && !verdict::problems(x).is_empty()).copied().collect();
    if failures.is_empty() && expected.is_empty() {
        out.push_str("<p>Every checked bound, failure policy and liveness check held.</p>\n");
        return;
    }
    if !failures.is_empty() {
        out.push_str("<h3>Failures, with the command that replays each</h3>\n<ul class=\"findings\">\n");
        for x in &failures {
            finding_item(out, x);
        }
        out.push_str("</ul>\n");
    }
    if !expected.is_empty() {
        let heading = format!(
            "{} run(s) with expected findings: the subjects' broken bounds and starved keys, and client time under \
             clock skew, with the command that replays each",
            expected.len()
        );
        let fold = expected.len() > 6;
        if fold {
            let _ = writeln!(out, "<details><summary>{heading}</summary>");
        } else {
            let _ = writeln!(out, "<h3>{heading}</h3>");
        }
        out.push_str("<ul class=\"findings\">\n");
        for x in &expected {
            finding_item(out, x);
        }
        out.push_str("</ul>\n");
        if fold {
            out.push_str("</details>\n");
        }
    }
}

/// The whole page.
pub(crate) fn page(r: &Results, charts: &[Chart]) -> String {
    let chart = |k: &ChartKind| charts.iter().find(|c| &c.kind == k);
    let lineup = Lineup::of(r);
    let mut out = String::new();
    let title = if r.verify.is_empty() { "Rate limiter simulation report" } else { "Rate limiter verification report" };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<header>\n<h1>{title}</h1>\n"
    );
    let seeds = r.seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let or_dash = |s: &str| if s.is_empty() { "—".to_string() } else { escape(s) };
    let _ = writeln!(
        out,
        "<dl class=\"meta\"><dt>backend</dt><dd>{}</dd><dt>seeds</dt><dd>{}</dd><dt>simulated time</dt>\
         <dd>{} ms per run</dd><dt>command</dt><dd><code>{}</code></dd><dt>schema</dt><dd>{}</dd></dl>",
        or_dash(&r.backend),
        or_dash(&seeds),
        r.duration_ms,
        or_dash(&r.command),
        or_dash(if r.schema.is_empty() { SCHEMA } else { &r.schema }),
    );
    let scen = scenarios(r);
    let expected = r.results.iter().filter(|x| !is_failure(x) && !verdict::problems(x).is_empty()).count();
    let failures = r.results.iter().filter(|x| is_failure(x)).count();
    let _ = writeln!(
        out,
        "<p class=\"summary\">{} runs in {} scenario(s). {expected} run(s) broke a check as an expected finding (the \
         subjects' bounds and starved keys, and client time under clock skew). {}</p>",
        r.results.len(),
        scen.len(),
        if failures > 0 {
            format!(
                "<strong class=\"bad\">{failures} run(s) failed: a bound that should hold broke, a failure policy \
                 broke its promise, or calls returned errors.</strong>"
            )
        } else {
            "No run failed: every bound that should hold held, and every failure policy kept its promise.".to_string()
        }
    );
    out.push_str("<nav><ol>\n");
    for c in charts {
        let label = match &c.kind {
            ChartKind::Rate => "Verified subjects".to_string(),
            ChartKind::Race => "GET+SET race".to_string(),
            ChartKind::Scenario(s) => format!("Scenario {}", escape(s)),
            ChartKind::Accuracy => "Accuracy".into(),
            ChartKind::Skew => "Clock skew".into(),
            ChartKind::Outage => "Redis outage".into(),
            ChartKind::Cost => "Cost".into(),
            // Drawn inside the verified subjects' section, beside their verdicts.
            ChartKind::Witness(..) => continue,
        };
        let _ = writeln!(out, "<li><a href=\"#{}\">{label}</a></li>", escape(&section_id(c)));
    }
    out.push_str("</ol></nav>\n</header>\n<main>\n");
    verified::section(&mut out, &r.verify, chart(&ChartKind::Rate), charts);

    if let Some(c) = chart(&ChartKind::Race) {
        let _ = writeln!(out, "<section id=\"{}\">\n<h2>GET+SET race</h2>", escape(&section_id(c)));
        how(
            &mut out,
            "One line per algorithm. The y axis is what was admitted divided by what the exact oracle admits of the \
             same requests: the dashed line at 1 is exactly the limit. An atomic Lua script stays at 1 however many \
             instances share the key, because Redis decides every request. The naive counter reads with GET and \
             writes with SET, so two instances can read the same count before either writes and both admit: it \
             climbs above 1 as instances are added (left). The right panel fixes the number of instances and moves \
             Redis further away (up to 40 ms a round trip, 8 instances, a 100 ms call timeout): the gap between GET \
             and SET widens and the naive counter loses more updates, while the atomic scripts stay at 1, a few \
             percent above at the far end where 20 ms of travel carries requests across a window's edge. Over-\
             admission by an atomic script here would mean the limiter stopped asking Redis.",
        );
        figure(&mut out, c);
        out.push_str("</section>\n");
    }

    for s in &scen {
        let Some(c) = chart(&ChartKind::Scenario(s.clone())) else { continue };
        let rows: Vec<&RunResult> = r.results.iter().filter(|x| &x.scenario == s).collect();
        let _ = writeln!(out, "<section id=\"{}\">\n<h2>Scenario {}</h2>", escape(&section_id(c)), escape(s));
        let description = rows.iter().map(|x| x.description.as_str()).find(|d| !d.is_empty()).unwrap_or("");
        if !description.is_empty() {
            let _ = writeln!(out, "<p class=\"desc\">{}</p>", escape(description));
        }
        figure(&mut out, c);
        let seed = first_seed(r).map_or_else(|| "—".to_string(), |s| s.to_string());
        let how = if is_in_flight(r, s) {
            format!(
                "One panel per subject, seed {seed}: the line is the most requests working at once in each time \
                 bucket, each counted from the moment it heard its slot was held until it sent its release (or \
                 died); the wide grey band is the limit N. Yellow bands are fault windows. Above the band more than \
                 N run at once. A subject that leaks slots shows the other way: the line sinks below N while \
                 requests keep being refused, and the table counts those refusals."
            )
        } else if is_post_hoc(r, s) {
            "One bar per subject: every unit it charged, at admission and after the work, in the span where it \
             came nearest its bound, as a share of what the promise for twice the capacity allows there (a key \
             owes at most one capacity). At 1 the bound is reached; past it, broken. Units a cap forgave are in \
             the results file (charges.uncharged)."
                .to_string()
        } else {
            format!(
                "One panel per algorithm, seed {seed}: each solid line is what the limiter admitted in each time \
                 bucket (one line per failure policy or time source the scenario runs), the thin dashed black line \
                 what an exact model of the same algorithm fed the same requests admitted, the wide grey band the \
                 limit. Yellow bands are fault windows. Where a solid line runs above the dashed one the limiter \
                 over-admits; below it, it wrongly denies."
            )
        };
        let _ = writeln!(out, "<p class=\"how\"><strong>How to read this.</strong> {how}</p>");
        table(&mut out, &lineup, &rows);
        findings(&mut out, &rows);
        out.push_str("</section>\n");
    }
    if scen.is_empty() {
        out.push_str(&format!(
            "<section><h2>Scenarios</h2><p>No scenario results in this file: run {}.</p></section>\n",
            escape(&results::command::command("simulate"))
        ));
    }

    let tail: [(ChartKind, &str, String); 4] = [
        (
            ChartKind::Accuracy,
            "Accuracy",
            "Rows are algorithms, columns scenarios. Each cell is the share of all requests that the limiter decided \
             differently from the exact oracle, averaged over seeds and policies. Top: wrongly allowed (admitted \
             although the oracle denied: over-admission). Bottom: wrongly limited (denied although the oracle \
             admitted: starvation). 0 is perfect. Colour runs on a logarithmic scale within each panel so that \
             small errors still show; read the number in the cell. Grey cells were not run."
                .to_string(),
        ),
        (
            ChartKind::Skew,
            "Clock skew",
            "One panel per algorithm. The x axis is how far apart the instances' clocks are; the y axis is what was \
             admitted divided by the most the algorithm promises, so above the dashed line at 1 the bound is \
             broken. With server time every script reads Redis's own clock (TIME) and skew cannot matter: the blue \
             line stays flat. With client time each instance sends its own clock, and a fast clock refills tokens \
             or expires windows early: the vermillion line shows how much that over-admits."
                .to_string(),
        ),
        (
            ChartKind::Outage,
            "Redis outage",
            format!(
                "Scenario {OUTAGE_SCENARIO}, one line per failure policy, admissions per second. Inside the shaded \
                 band Redis is down. Fail open admits everything that arrives (above the limit line: over-admission), \
                 fail closed admits nothing (below the dashed oracle: every request is wrongly denied), a local \
                 budget admits each instance's static share. After Redis is back, the lines should rejoin the oracle; \
                 the time that takes is the \"time to recover\" in the scenario's table."
            ),
        ),
        (
            ChartKind::Cost,
            "Cost",
            "Left: Redis commands sent per request: each atomic algorithm is one EVALSHA, the naive counter needs a \
             GET and a SET, and requests decided by a failure policy while Redis was unreachable send none, so \
             the mean can fall below 1. Right: Redis memory per key the algorithm keeps, in bytes: the sliding log stores one \
             sorted-set member per admitted unit, so its memory grows with the limit, while the others keep a \
             counter, a pair of counters, a small hash or a single timestamp. Averaged over every run that \
             recorded Redis statistics."
                .to_string(),
        ),
    ];
    for (kind, title, text) in tail {
        let Some(c) = chart(&kind) else { continue };
        let _ = writeln!(out, "<section id=\"{}\">\n<h2>{title}</h2>", escape(&section_id(c)));
        how(&mut out, &text);
        figure(&mut out, c);
        out.push_str("</section>\n");
    }
    let _ = writeln!(
        out,
        "</main>\n<footer>Generated by the <code>reports</code> crate from a results file of schema {}. \
         Charts are PNG files next to this page.</footer>\n</body>\n</html>",
        escape(SCHEMA)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escape_neutralises_markup_and_quotes() {
        assert_eq!(escape("<script>alert('x')</script>"), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
        assert_eq!(escape("a & \"b\""), "a &amp; &quot;b&quot;");
    }
}
