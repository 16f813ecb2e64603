//! The report as a file system sees it: errors for bad input, every chart written, HTML escaped.

use std::path::{Path, PathBuf};
use std::process::Command;

use reports::{load_results, render, render_results, Results, RunResult, Verdict, SCHEMA};

// Each test binary compiles all the shared support and uses part of it.
#[allow(dead_code)]
mod support;
use support::sample::{sample_results, sample_subject, sample_verification};

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1A, b'\n'];

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn error_of(path: &Path) -> String {
    let out = path.parent().unwrap().join("out");
    format!("{:#}", render(path, &out).expect_err("rendering should fail"))
}

fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(bytes.len() > 1000, "{} is only {} bytes", path.display(), bytes.len());
    assert_eq!(bytes[..8], PNG_SIGNATURE, "{} is not a PNG", path.display());
}

#[test]
fn missing_results_file_error_names_the_file_and_says_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.json");
    let e = error_of(&path);
    assert!(e.starts_with(&format!("{}: no such file", path.display())), "{e}");
    assert!(e.contains(&results::command::command("simulate")), "{e}");
}

#[test]
fn invalid_json_error_names_the_file_and_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "results.json", "{\"schema\": \"rate-limit-sim/3\",\n  \"results\": [");
    let e = error_of(&path);
    assert!(e.starts_with(&format!("{}: not valid JSON", path.display())), "{e}");
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn earlier_schemas_are_read_in_this_ones_shape() {
    let dir = tempfile::tempdir().unwrap();
    // Version 1 named a run's subject `algorithm`, and flagged an external subject `subject`.
    let one = write(
        dir.path(),
        "one.json",
        r#"{"schema": "rate-limit-sim/1", "results": [{"scenario": "x", "algorithm": "naive", "subject": true},
            {"scenario": "x", "algorithm": "gcra", "subject": false}], "race_sweep": [{"algorithm": "naive"}]}"#,
    );
    let r = load_results(&one).expect("a version 1 file reads");
    assert_eq!(r.schema, SCHEMA);
    assert_eq!((r.results[0].subject.as_str(), r.results[0].library), ("naive", false));
    assert_eq!((r.results[1].subject.as_str(), r.results[1].library), ("gcra", true));
    assert_eq!(r.race_sweep[0].subject, "naive");
    // Version 2 had no clock-trust verdict per run, nor expired keys.
    let two = write(
        dir.path(),
        "two.json",
        r#"{"schema": "rate-limit-sim/2", "results": [{"scenario": "x", "subject": "gcra", "library": true,
            "redis": {"keys": 3}}]}"#,
    );
    let r = load_results(&two).expect("a version 2 file reads");
    assert_eq!(r.results[0].beyond_clock_trust, results::Verdict::None);
    assert_eq!(r.results[0].redis.as_ref().map(|c| (c.keys, c.expired_keys)), Some((3, 0)));
    // A shape error in an earlier version names that version.
    let bad = write(dir.path(), "bad.json", r#"{"schema": "rate-limit-sim/2", "results": [{"requests": "many"}]}"#);
    let e = error_of(&bad);
    assert!(e.starts_with(&format!("{}: does not match schema \"rate-limit-sim/2\"", bad.display())), "{e}");
}

#[test]
fn a_schema_before_the_first_is_outdated_and_says_to_rerun_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "results.json", r#"{"schema": "rate-limit-sim/0", "results": {"old": true}}"#);
    assert_eq!(
        error_of(&path),
        format!(
            "{}: schema \"rate-limit-sim/0\" is outdated; expected \"{SCHEMA}\": re-run {}",
            path.display(),
            results::command::command("simulate")
        )
    );
}

#[test]
fn newer_schema_error_says_the_report_is_older_than_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "results.json", r#"{"schema": "rate-limit-sim/4"}"#);
    let e = error_of(&path);
    assert!(e.starts_with(&format!("{}: schema \"rate-limit-sim/4\" is newer", path.display())), "{e}");
}

#[test]
fn foreign_schema_and_missing_schema_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = write(dir.path(), "foreign.json", r#"{"schema": "grafana-dashboard/7"}"#);
    let e = error_of(&foreign);
    assert!(e.starts_with(&format!("{}: schema \"grafana-dashboard/7\" is not", foreign.display())), "{e}");
    assert!(e.contains(SCHEMA), "{e}");

    let missing = write(dir.path(), "missing.json", r#"{"results": []}"#);
    let e = error_of(&missing);
    assert!(e.starts_with(&format!("{}: no \"schema\" field", missing.display())), "{e}");

    let array = write(dir.path(), "array.json", "[1, 2]");
    let e = error_of(&array);
    assert!(e.starts_with(&format!("{}: not a simulation results file", array.display())), "{e}");

    let number = write(dir.path(), "number.json", r#"{"schema": 1}"#);
    let e = error_of(&number);
    assert!(e.starts_with(&format!("{}: \"schema\" is 1, not a string", number.display())), "{e}");
}

#[test]
fn field_of_the_wrong_type_error_names_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "results.json",
        r#"{"schema": "rate-limit-sim/3", "results": [{"scenario": "x", "requests": "many"}]}"#,
    );
    let e = error_of(&path);
    assert!(e.starts_with(&format!("{}: does not match schema \"rate-limit-sim/3\"", path.display())), "{e}");
    assert!(e.contains("\"many\"") && e.contains("line 1"), "{e}");
}

#[test]
fn full_results_render_every_chart_as_a_png_linked_from_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let json = write(dir.path(), "results.json", &serde_json::to_string(&sample_results()).unwrap());
    let out = dir.path().join("report");
    let paths = render(&json, &out).unwrap();
    assert_eq!(paths.index_html, out.join("index.html"));
    // Race first, one chart per scenario (10 in the sample), then accuracy, skew, outage, cost.
    let names: Vec<String> =
        paths.charts.iter().map(|c| c.path.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 1 + 10 + 4, "{names:?}");
    assert_eq!(names[0], "race.png");
    assert_eq!(names[5], "scenario-05-redis-outage.png");
    assert_eq!(&names[11..], ["accuracy.png", "skew.png", "outage.png", "cost.png"]);
    let html = std::fs::read_to_string(&paths.index_html).unwrap();
    for (path, name) in paths.charts.iter().map(|c| &c.path).zip(&names) {
        assert_eq!(path.parent(), Some(out.as_path()));
        assert_png(path);
        assert!(html.contains(&format!("<img src=\"{name}\"")), "index.html does not show {name}");
    }
    assert!(!html.contains("no data for this chart"), "the full sample should fill every chart");
    // Races come first on the page.
    let race = html.find("race.png").unwrap();
    assert!(paths.charts[1..]
        .iter()
        .all(|c| html.find(&*c.path.file_name().unwrap().to_string_lossy()).unwrap() > race));
}

#[test]
fn broken_bounds_are_highlighted_with_seed_and_replay_and_expected_findings_labelled() {
    let mut r = sample_results();
    let run = r
        .results
        .iter_mut()
        .find(|x| x.scenario == "redis-outage" && x.subject == "sliding-log" && x.seed == 2 && x.policy == "fail-open")
        .unwrap();
    run.bound = Verdict::Broken;
    run.bound_detail = "max 31 admitted in a 1000 ms window; bound 20".into();
    let run = r
        .results
        .iter_mut()
        .find(|x| x.scenario == "partition" && x.subject == "gcra" && x.seed == 3 && x.policy == "local-budget")
        .unwrap();
    run.policy_check = Verdict::Broken;
    run.policy_detail = "instance 0 admitted 9 in 500 ms; budget 2".into();
    let dir = tempfile::tempdir().unwrap();
    let paths = render_results(&r, dir.path()).unwrap();
    let html = std::fs::read_to_string(paths.index_html).unwrap();

    assert!(html.contains("<strong class=\"bad\">2 run(s) failed"), "the summary counts both failures");
    assert_eq!(html.matches("<tr class=\"broken\">").count(), 2, "one table row per failing group");
    assert!(html.contains("<tr class=\"expected\">"), "subjects and client time under skew");
    let item = |replay: &str| {
        let at = html.find(&format!("<code>{replay}</code>")).unwrap_or_else(|| panic!("no replay {replay}"));
        html[html[..at].rfind("<li>").unwrap()..at].to_string()
    };
    let bound = item("cargo xtask simulate --scenario redis-outage --subject sliding-log --seed 2 --policy fail-open");
    assert!(
        bound.contains(
            "<strong>sliding-log</strong>, fail-open, server time, seed 2: <span class=\"tag broken\">BROKEN</span> \
             bound: max 31 admitted in a 1000 ms window; bound 20"
        ),
        "{bound}"
    );
    let policy = item("cargo xtask simulate --scenario partition --subject gcra --seed 3 --policy local-budget");
    assert!(policy.contains("failure policy: instance 0 admitted 9 in 500 ms; budget 2"), "{policy}");
    let expected =
        item("cargo xtask simulate --scenario clock-skew --subject token-bucket --seed 1 --time-source client");
    assert!(expected.contains("<span class=\"tag expected\">expected finding</span> bound broken"), "{expected}");
}

#[test]
fn a_verification_opens_with_its_subjects_verdicts_evidence_replay_and_rate_chart() {
    let mut r = sample_results();
    r.verify = vec![sample_subject("mine", true), sample_subject("<b>theirs</b>", false)];
    let dir = tempfile::tempdir().unwrap();
    let paths = render_results(&r, dir.path()).unwrap();
    let names: Vec<String> =
        paths.charts.iter().map(|c| c.path.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names[0], "rate.png", "{names:?}");
    // The broken bound's witness on a timeline, drawn for the broken subject only.
    assert_eq!(names[1], "witness-01-mine-bound.png", "{names:?}");
    assert_eq!(names[2], "race.png", "{names:?}");
    assert_png(&paths.charts[0].path);
    assert_png(&paths.charts[1].path);
    let html = std::fs::read_to_string(&paths.index_html).unwrap();
    assert!(html.contains("<h1>Rate limiter verification report</h1>"));
    let section = &html[html.find("<h2>Verified subjects</h2>").expect("a verified subjects section")..];
    assert!(html.find("<h2>Verified subjects</h2>") < html.find("<h2>GET+SET race</h2>"), "verdicts come first");
    assert!(section.contains("<img src=\"rate.png\""));
    assert!(section.contains("mine <span class=\"tag broken\">1 promise(s) broken</span>"), "{section}");
    assert!(section.contains("&lt;b&gt;theirs&lt;/b&gt; <span class=\"tag held\">every promise held</span>"));
    assert!(section.contains("<pre>t (ms)  instance  asked  admitted\n     0         0     10        10"));
    assert!(section.contains(
        "replay: <code>cargo xtask verify mine.toml --quota 10/1000/10 --replay &quot;0:0:10,999:1:1&quot;</code>\
         <figure><img src=\"witness-01-mine-bound.png\""
    ));
    assert!(!html[..html.find("<main>").unwrap()].contains("witness-"), "a witness is no section of its own");
    assert_eq!(section.matches("<tr class=\"broken\">").count(), 1, "only the broken check is marked");
    assert!(section.contains("<tr><th>largest burst at once</th><td>11 (the promise allows 10)</td></tr>"));
    assert!(!html.contains("<b>theirs"), "subject names are escaped");
}

#[test]
fn the_sample_fails_no_run_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let paths = render_results(&sample_results(), dir.path()).unwrap();
    let html = std::fs::read_to_string(paths.index_html).unwrap();
    assert!(html.contains("No run failed"));
    assert!(!html.contains("<tr class=\"broken\">"));
}

#[test]
fn partial_results_render_placeholders_that_say_which_run_fills_them() {
    let dir = tempfile::tempdir().unwrap();
    let json = write(
        dir.path(),
        "results.json",
        r#"{"schema": "rate-limit-sim/2",
            "results": [{"scenario": "steady-overload", "subject": "gcra", "requests": 10, "admitted": 5,
                         "recover_ms": null}]}"#,
    );
    let out = dir.path().join("report");
    let paths = render(&json, &out).unwrap();
    for p in paths.charts.iter().map(|c| &c.path) {
        assert_png(p);
    }
    let html = std::fs::read_to_string(&paths.index_html).unwrap();
    // race, the scenario without a series, skew, outage, cost; accuracy has its one cell.
    assert_eq!(html.matches("has no data for this chart").count(), 5, "{html}");
}

#[test]
fn empty_results_render_a_page_saying_to_run_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let empty = Results { schema: SCHEMA.into(), ..Results::default() };
    let paths = render_results(&empty, dir.path()).unwrap();
    assert_eq!(paths.charts.len(), 5);
    let html = std::fs::read_to_string(paths.index_html).unwrap();
    assert!(html.contains("No scenario results in this file"));
}

#[test]
fn hostile_strings_are_escaped_in_the_page_and_never_reach_file_names() {
    let hostile = "<script>alert(1)</script>";
    let mut r = sample_results();
    r.command = "\"><script>alert('command')</script>".into();
    r.backend = "<b>model</b>".into();
    for x in r.results.iter_mut().filter(|x| x.scenario == "steady-trickle") {
        x.scenario = hostile.into();
        x.description = "<img src=x onerror=alert(2)> & more".into();
        x.replay = "cargo xtask simulate --scenario '<script>' && rm -rf /".into();
    }
    r.results.push(RunResult {
        scenario: "x".into(),
        subject: "<i>evil</i>".into(),
        bound: Verdict::Broken,
        bound_detail: "</code></li><script>alert(3)</script>".into(),
        ..RunResult::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let paths = render_results(&r, dir.path()).unwrap();
    let html = std::fs::read_to_string(&paths.index_html).unwrap();
    assert!(!html.to_lowercase().contains("<script"), "unescaped script tag in the page");
    assert!(!html.contains("<img src=x") && !html.contains("<i>evil") && !html.contains("<b>model"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;img src=x onerror=alert(2)&gt; &amp; more"));
    assert!(html.contains("&quot;&gt;&lt;script&gt;alert(&#39;command&#39;)"));
    for p in paths.charts.iter().map(|c| &c.path) {
        assert_eq!(p.parent(), Some(dir.path()), "{} escaped the report directory", p.display());
        let name = p.file_name().unwrap().to_string_lossy();
        assert!(name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'), "{name}");
        assert_png(p);
    }
}

#[test]
fn rendering_twice_gives_identical_files() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let r = sample_results();
    let pa = render_results(&r, a.path()).unwrap();
    let pb = render_results(&r, b.path()).unwrap();
    let (ca, cb) = (pa.charts.iter().map(|c| &c.path), pb.charts.iter().map(|c| &c.path));
    for (x, y) in ca.chain([&pa.index_html]).zip(cb.chain([&pb.index_html])) {
        assert_eq!(std::fs::read(x).unwrap(), std::fs::read(y).unwrap(), "{} differs", x.display());
    }
}

fn report_bin(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_report")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn report_binary_refuses_bad_arguments_with_a_reason_and_usage() {
    const USAGE: &str = "Usage: report --from <RESULTS.json> --out <DIR>";
    // (arguments, the reason, whether clap prints the usage line with it)
    for (args, reason, usage) in [
        (&[][..], "required arguments were not provided:\n  --from <RESULTS.json>\n  --out <DIR>", true),
        (&["--from", "r.json"][..], "required arguments were not provided:\n  --out <DIR>", true),
        (&["--from"][..], "a value is required for '--from <RESULTS.json>'", false),
        (&["--from", "--out", "dir"][..], "a value is required for '--from <RESULTS.json>'", false),
        (&["--from=", "--out", "dir"][..], "a value is required for '--from <RESULTS.json>'", false),
        (&["--bogus"][..], "unexpected argument '--bogus'", true),
        (&["results.json"][..], "unexpected argument 'results.json'", true),
    ] {
        let (code, _, err) = report_bin(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(reason) && err.contains("try '--help'"), "{args:?}: {err}");
        assert!(!usage || err.contains(USAGE), "{args:?}: no usage line in {err}");
    }
    // --from repeats (the files are merged); a missing one is named before anything renders.
    let (code, _, err) = report_bin(&["--from", "a", "--from", "b", "--out", "d"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("a: no such file"), "{err}");
    let (code, out, _) = report_bin(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains(USAGE) && out.contains("--from <RESULTS.json>  Results file"), "{out}");
}

#[test]
fn report_binary_names_a_missing_file_and_renders_a_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json");
    let out_dir = dir.path().join("out");
    let (code, _, err) = report_bin(&["--from", missing.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains(&format!("{}: no such file", missing.display())), "{err}");

    let json = write(dir.path(), "results.json", &serde_json::to_string(&sample_results()).unwrap());
    let arg_from = format!("--from={}", json.display());
    let (code, out, err) = report_bin(&[&arg_from, "--out", out_dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("index.html") && out.contains("15 chart(s)"), "{out}");
    assert!(out_dir.join("index.html").is_file());
}

#[test]
fn single_points_and_degenerate_values_render_without_panicking() {
    let json = r#"{"schema": "rate-limit-sim/2", "seeds": [7],
        "results": [{"scenario": "only", "subject": "mystery-algo", "seed": 7, "requests": 0, "limit": 0,
                     "series": {"bucket_ms": 0, "admitted": [0], "oracle_admitted": [], "limit_per_bucket": 0},
                     "redis": {"commands": 0, "keys": 0},
                     "faults": [{"kind": "forever", "at_ms": 0}, {"kind": "instant", "at_ms": 5, "until_ms": 5}]},
                    {"scenario": "redis-outage", "subject": "naive", "seed": 9, "requests": 3, "policy": "odd",
                     "series": {"bucket_ms": 500, "admitted": [1000000000000, 0], "oracle_admitted": [3, 3]},
                     "redis": {"commands": 5, "keys": 1, "memory_bytes": 64}}],
        "race_sweep": [{"subject": "naive", "instances": 4, "latency_ms": 1, "limit": 0, "admitted": 3}],
        "skew_sweep": [{"subject": "gcra", "time_source": "client", "skew_ms": -300, "admitted": 5, "bound": 0},
                       {"subject": "gcra", "time_source": "client", "skew_ms": 300, "admitted": 5, "bound": 4}]}"#;
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "results.json", json);
    let paths = render(&path, &dir.path().join("out")).unwrap();
    assert_eq!(paths.charts.len(), 1 + 2 + 4);
    for p in paths.charts.iter().map(|c| &c.path) {
        assert_png(p);
    }
}

/// Every chart's text, as drawn: inside the image, and no two texts overlapping.
fn assert_text_laid_out(name: &str, paths: &reports::ReportPaths) {
    let mut problems = Vec::new();
    for chart in &paths.charts {
        let file = chart.path.file_name().unwrap().to_string_lossy();
        assert!(!chart.text.is_empty(), "{file}: no text recorded");
        for t in chart.text.iter().filter(|t| !t.within(chart.width as f64, chart.height as f64)) {
            problems.push(format!("{file}: {:?} runs off the {}x{} image: {t:?}", t.text, chart.width, chart.height));
        }
        for (i, j) in reports::overlapping(&chart.text) {
            let (a, b) = (&chart.text[i], &chart.text[j]);
            problems.push(format!("{file}: {:?} overlaps {:?}: {a:?} / {b:?}", a.text, b.text));
        }
    }
    assert!(problems.is_empty(), "{name}: {} text layout problem(s):\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn no_chart_text_overlaps_or_runs_off_its_image() {
    let dir = tempfile::tempdir().unwrap();
    let sample = render_results(&sample_verification(), &dir.path().join("sample")).unwrap();
    assert_text_laid_out("sample", &sample);
    let real = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/real-run.json");
    let real = render(real.as_ref(), &dir.path().join("real")).unwrap();
    assert_text_laid_out("real run", &real);
}
