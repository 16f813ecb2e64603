//! Simulation results (JSON) -> PNG charts and one self-contained HTML report.
//!
//! `cargo xtask simulate` writes a results file of schema [`SCHEMA`]; [`render`] reads it and
//! writes `index.html` plus one PNG per chart into an output directory. The page needs no
//! network and no JavaScript: images sit next to it and are referenced by file name.
//!
//! The schema, and every verdict word the page and the charts show, come from the small
//! `results` crate the simulator writes with: the report builds without the simulator, and
//! says "held", "starved 1/1 (expected)" or "BROKEN 2/3" exactly where the terminal table does.
//!
//! Text in the charts is drawn with DejaVu Sans, embedded in the crate, so rendering works on a
//! machine with no system fonts and no fontconfig. Every chart records where each of its texts
//! landed ([`RenderedChart::text`]), so tests can check that none overlaps another.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! let paths = reports::render("target/sim/results.json".as_ref(), "target/sim/report".as_ref())?;
//! println!("open {}", paths.index_html.display());
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod charts;
pub mod cli;
mod html;
mod lineup;
mod schema;
mod style;
mod text_box;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};

pub use schema::{
    FaultWindow, Profile, RacePoint, RatePoint, RedisCost, Results, RunResult, Series, SkewPoint, Sources,
    SubjectReport, Verdict, VerdictLine, Witness, WitnessFault, WitnessRequest, SCHEMA, SCHEMA_FAMILY, SCHEMA_VERSION,
};
pub use text_box::{overlapping, TextBox};

/// Everything [`render`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportPaths {
    /// The report page.
    pub index_html: PathBuf,
    /// Every chart, in the order the page shows them.
    pub charts: Vec<RenderedChart>,
}

/// One chart [`render`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedChart {
    /// The PNG file.
    pub path: PathBuf,
    /// Its size in pixels.
    pub width: u32,
    pub height: u32,
    /// Every text drawn on it (titles, legends, axis and tick labels), where its pixels landed:
    /// no two may overlap ([`overlapping`]), and every one lies within the image.
    pub text: Vec<TextBox>,
}

/// Reads a results file and renders the report into `out_dir` (created if missing).
///
/// Errors name the file and what is wrong with it: missing, not JSON, an outdated or foreign
/// `schema`, or a field of the wrong type.
pub fn render(results_json_path: &Path, out_dir: &Path) -> anyhow::Result<ReportPaths> {
    let results = load_results(results_json_path)?;
    render_results(&results, out_dir)
}

/// Renders the merge of several results files (`results::merge`) into `out_dir`; one file is
/// rendered as [`render`] does. Prints the merged runs' count and trace hash, which equal the
/// unsharded sweep's when the files are its shards.
pub fn render_merged(paths: &[std::path::PathBuf], out_dir: &Path) -> anyhow::Result<ReportPaths> {
    let mut files = Vec::with_capacity(paths.len());
    for p in paths {
        files.push((p.display().to_string(), load_results(p)?));
    }
    let merged = results::merge(files).map_err(|e| anyhow!("cannot merge the results files: {e}"))?;
    if paths.len() > 1 {
        println!("merged {} files: {} runs, trace hash {}", paths.len(), merged.results.len(), trace_hash(&merged));
    }
    render_results(&merged, out_dir)
}

/// One SHA-1 over every run's trace hash, in order: what `cargo xtask simulate` prints as
/// "trace hash".
pub fn trace_hash(results: &Results) -> String {
    let mut all = sha1_smol::Sha1::new();
    for r in &results.results {
        all.update(r.trace_hash.as_bytes());
    }
    all.digest().to_string()
}

/// Renders already parsed results into `out_dir` (created if missing).
pub fn render_results(results: &Results, out_dir: &Path) -> anyhow::Result<ReportPaths> {
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("{}: cannot create the report directory", out_dir.display()))?;
    charts::ensure_fonts()?;
    let charts = charts::render_all(results, out_dir)?;
    let page = html::page(results, &charts);
    let index_html = out_dir.join("index.html");
    std::fs::write(&index_html, page).with_context(|| format!("{}: cannot write", index_html.display()))?;
    let charts = charts
        .into_iter()
        .map(|c| RenderedChart { path: out_dir.join(&c.file), width: c.size.0, height: c.size.1, text: c.text })
        .collect();
    Ok(ReportPaths { index_html, charts })
}

/// Reads and checks a results file.
///
/// The `schema` field is checked before anything else, so a file from an older simulator says
/// that it is outdated rather than which field it lacks.
pub fn load_results(path: &Path) -> anyhow::Result<Results> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            anyhow!("{shown}: no such file: run {} to produce a results file", results::command::command("simulate"))
        }
        _ => anyhow!("{shown}: cannot read: {e}"),
    })?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| anyhow!("{shown}: not valid JSON: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err(anyhow!(
            "{shown}: not a simulation results file: expected a JSON object with \"schema\": \"{SCHEMA}\""
        ));
    };
    let (schema, version) = match object.get("schema") {
        None => {
            return Err(anyhow!(
                "{shown}: no \"schema\" field: not a simulation results file (expected \"schema\": \"{SCHEMA}\" \
                 as written by {})",
                results::command::command("simulate")
            ))
        }
        Some(serde_json::Value::String(schema)) => (schema.clone(), check_schema(&shown.to_string(), schema)?),
        Some(other) => {
            return Err(anyhow!("{shown}: \"schema\" is {other}, not a string; expected \"{SCHEMA}\""));
        }
    };
    if version == SCHEMA_VERSION {
        // From the bytes, so a field of the wrong type is named with its line.
        return serde_json::from_slice(&bytes).map_err(|e| anyhow!("{shown}: does not match schema \"{SCHEMA}\": {e}"));
    }
    let mut value = value;
    upgrade(&mut value, version);
    serde_json::from_value(value).map_err(|e| anyhow!("{shown}: does not match schema \"{schema}\": {e}"))
}

/// The version of a file of this schema's family that this report reads (this one or an
/// earlier one), or why not.
fn check_schema(shown: &str, schema: &str) -> anyhow::Result<u32> {
    let theirs: Option<u32> =
        schema.strip_prefix(SCHEMA_FAMILY).and_then(|v| v.strip_prefix('/')).and_then(|v| v.parse().ok());
    match theirs {
        Some(t @ 1..=SCHEMA_VERSION) => Ok(t),
        Some(0) => Err(anyhow!(
            "{shown}: schema \"{schema}\" is outdated; expected \"{SCHEMA}\": re-run {}",
            results::command::command("simulate")
        )),
        Some(_) => Err(anyhow!(
            "{shown}: schema \"{schema}\" is newer than this report understands; expected \"{SCHEMA}\": \
             update the reports crate to match the simulator"
        )),
        None => Err(anyhow!(
            "{shown}: schema \"{schema}\" is not a rate limiter simulation results file; expected \"{SCHEMA}\""
        )),
    }
}

/// A results file of schema version `from` in this version's shape (see `results::schema`):
/// 1's `algorithm` and external-subject flag `subject` become 2's `subject` and `library`;
/// what 3 added reads as its defaults.
fn upgrade(value: &mut serde_json::Value, from: u32) {
    use serde_json::Value;
    if from < 2 {
        let runs = value.get_mut("results").and_then(Value::as_array_mut).into_iter().flatten();
        for run in runs.filter_map(Value::as_object_mut) {
            let external = run.remove("subject").and_then(|v| v.as_bool());
            if let Some(name) = run.remove("algorithm") {
                run.insert("subject".into(), name);
            }
            if let Some(external) = external {
                run.insert("library".into(), Value::Bool(!external));
            }
        }
        for sweep in ["race_sweep", "skew_sweep"] {
            let points = value.get_mut(sweep).and_then(Value::as_array_mut).into_iter().flatten();
            for point in points.filter_map(Value::as_object_mut) {
                if let Some(name) = point.remove("algorithm") {
                    point.insert("subject".into(), name);
                }
            }
        }
    }
    if let Some(schema) = value.get_mut("schema") {
        *schema = Value::String(SCHEMA.to_owned());
    }
}
