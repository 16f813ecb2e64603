//! The "Verified subjects" section: what `cargo xtask verify` judged of each subject file, one
//! verdict per promise with its evidence and replay command, the profile, and the rate chart.

use std::fmt::Write as _;

use results::subject::{conclusion, headline, profile_rows};
use results::{SubjectReport, Verdict};

use super::{escape, figure, how, section_id};
use crate::charts::{Chart, ChartKind};

/// Writes the section; `rate` is the delivered-against-offered chart, and `charts` hold the
/// witnesses' timelines drawn beside their verdicts.
pub(super) fn section(out: &mut String, subjects: &[SubjectReport], rate: Option<&Chart>, charts: &[Chart]) {
    if subjects.is_empty() {
        return;
    }
    let id = rate.map_or_else(|| "verified".to_owned(), section_id);
    let _ = writeln!(out, "<section id=\"{}\">\n<h2>Verified subjects</h2>", escape(&id));
    how(
        out,
        "One block per subject file. Each check is one promise the subject's algorithm makes: \"held\" says what \
         it rests on, \"broken\" shows the shortest schedule that breaks it and the command that replays it on \
         one key, with its witness on a timeline (each admission counted up where it may first have been decided, \
         against what the promise allows: the dashed line). The profile measures the subject whatever it promises. \
         The first chart draws what each subject delivered against what was offered: an exact limiter follows the \
         dashed line.",
    );
    if let Some(c) = rate {
        figure(out, c);
    }
    for r in subjects {
        subject(out, r, charts);
    }
    out.push_str("</section>\n");
}

fn subject(out: &mut String, r: &SubjectReport, charts: &[Chart]) {
    let broken = results::subject::broken(r) > 0;
    let _ = writeln!(
        out,
        "<h3>{} <span class=\"tag {}\">{}</span></h3>\n<p><code>{}</code>: {}</p>",
        escape(&r.name),
        if broken { "broken" } else { "held" },
        escape(&conclusion(r)),
        escape(&r.file),
        escape(&headline(r)),
    );
    out.push_str("<table>\n<tr><th>check</th><th>verdict</th><th>what it rests on</th></tr>\n");
    for v in &r.verdicts {
        let class = match v.verdict {
            Verdict::Broken | Verdict::Held | Verdict::Expected => v.verdict.word(),
            Verdict::None | Verdict::NotJudged | Verdict::NotApplicable => "none",
        };
        let _ = write!(
            out,
            "<tr class=\"{}\"><td class=\"name\">{}</td><td><span class=\"tag {class}\">{}</span></td><td>{}",
            match class {
                "broken" | "expected" => class,
                _ => "",
            },
            escape(&v.check),
            escape(v.verdict.word()),
            escape(&v.detail)
        );
        if !v.evidence.is_empty() {
            let _ = write!(out, "<pre>{}</pre>", escape(&v.evidence));
        }
        if !v.replay.is_empty() {
            let _ = write!(out, "replay: <code>{}</code>", escape(&v.replay));
        }
        let timeline = ChartKind::Witness(r.name.clone(), v.check.clone());
        if let Some(c) = charts.iter().find(|c| c.kind == timeline) {
            figure(out, c);
        }
        out.push_str("</td></tr>\n");
    }
    out.push_str("</table>\n<table class=\"profile\">\n<caption>profile</caption>\n");
    for (label, value) in profile_rows(r) {
        let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", escape(label), escape(&value));
    }
    out.push_str("</table>\n");
}
