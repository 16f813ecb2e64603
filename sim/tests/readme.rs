//! The README's transcripts of the harness are what it prints: the sample table under "What
//! the output means" is what `cargo xtask simulate` prints for that scenario with the default
//! seed and duration, and the verdicts the README and docs/VERIFY.md show are what the `cargo
//! xtask verify` command the README runs prints. Whoever changes the numbers updates the README too.

use sim::cli;
use sim_engine::subject::Subject;
use sim_engine::{run, scenario, table};

const README: &str = include_str!("../../README.md");
const VERIFY_DOC: &str = include_str!("../../docs/VERIFY.md");

/// The first ```text block under the "What the output means" heading.
fn readme_table() -> &'static str {
    let section = README.find("## What the output means").expect("the README has a \"What the output means\" section");
    let rest = &README[section..];
    let start = rest.find("```text\n").expect("a ```text block under \"What the output means\"") + "```text\n".len();
    let end = rest[start..].find("```").expect("the ```text block ends");
    &rest[start..start + end]
}

#[test]
fn the_readme_sample_table_is_what_the_simulator_prints() {
    let shown = readme_table();
    let header = shown.lines().next().expect("the README's table is empty");
    let name = header
        .strip_prefix("== ")
        .and_then(|h| h.split(' ').next())
        .unwrap_or_else(|| panic!("the README's block does not start with a scenario header: {header:?}"));
    // The options the binary runs with when given only the scenario: every subject, the
    // default seeds and duration, the scenario's own instances and policies.
    let o = cli::SimulateArgs::parse_args(["--scenario", name]).unwrap_or_else(|e| panic!("{e}")).run;
    let found =
        scenario::find(name).unwrap_or_else(|| panic!("the README shows scenario {name:?}, not in the catalogue"));
    let specs = found.runs(&Subject::catalogue(), &o.seed_list(), o.instances, o.duration_ms());
    let results = run::run_many(&specs, o.threads, &|| {}).unwrap();
    let printed = table::render(&results);
    let printed = printed.trim_start_matches('\n');
    assert!(
        shown == printed,
        "README.md's table under \"What the output means\" is not what `cargo xtask simulate --scenario {name}` \
         prints; replace it with:\n{printed}"
    );
}

/// The `cargo xtask verify` command the README runs (its first ```sh block that is one), and
/// the ```text block after it.
fn readme_verify() -> (Vec<&'static str>, &'static str) {
    let at = README.find("```sh\ncargo xtask verify ").expect("the README runs cargo xtask verify in a ```sh block");
    let rest = &README[at + "```sh\n".len()..];
    let command = rest.lines().next().expect("a command");
    let args = command.strip_prefix("cargo xtask verify ").expect("the command").split_whitespace().collect();
    let start = rest.find("```text\n").expect("a ```text block after the command") + "```text\n".len();
    let end = rest[start..].find("```").expect("the ```text block ends");
    (args, &rest[start..start + end])
}

/// Whether `printed` reads as `shown` does, where `shown` may leave things out: a line that is
/// only `...` stands for any lines, and a line ending in ` ...` for any line it begins. None if
/// so, else the first line of `shown` that does not match.
fn mismatch<'a>(shown: &'a str, printed: &str) -> Option<&'a str> {
    let mut printed = printed.lines().peekable();
    let mut shown = shown.lines().peekable();
    while let Some(want) = shown.next() {
        if want.trim() == "..." {
            let next = shown.peek().copied()?;
            while printed.peek().is_some_and(|got| !matches(next, got)) {
                printed.next();
            }
            continue;
        }
        match printed.next() {
            Some(got) if matches(want, got) => {}
            _ => return Some(want),
        }
    }
    None
}

fn matches(want: &str, got: &str) -> bool {
    match want.strip_suffix(" ...") {
        Some(start) => got.starts_with(start),
        None => want == got,
    }
}

#[test]
fn elided_transcripts_match_only_what_they_show() {
    let printed = "a\nb 1 2 3\nc\nd\ne";
    assert_eq!(mismatch("a\nb 1 ...\n...\ne", printed), None);
    assert_eq!(mismatch("a\nb 2 ...\n...\ne", printed), Some("b 2 ..."));
    assert_eq!(mismatch("a\nb 1 2 3\nd", printed), Some("d"));
    assert_eq!(mismatch("a\n...\nf", printed), Some("f"));
}

#[test]
fn the_readme_verify_transcript_is_what_the_command_prints() {
    let (args, shown) = readme_verify();
    let out = tempfile::tempdir().expect("a temporary directory");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_ratelimit-lab"))
        .current_dir(&root)
        .env(results::command::INVOKED_AS_ENV, "cargo xtask")
        .arg("verify")
        .args(&args)
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("ratelimit-lab verify runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let from = stdout.find("\n== adr002").map_or(0, |i| i + 1);
    let printed = &stdout[from..];
    // docs/VERIFY.md reads the same run's verdicts under "Reading the verdict".
    let doc = VERIFY_DOC.split("## Reading the verdict").nth(1).expect("docs/VERIFY.md explains the verdict");
    let doc = doc.split("```text\n").nth(1).and_then(|b| b.split("```").next()).expect("with a ```text block");
    for (name, shown) in [("README.md", shown), ("docs/VERIFY.md", doc)] {
        if let Some(line) = mismatch(shown, printed) {
            panic!(
                "{name}'s verify transcript is not what `cargo xtask verify {}` prints, from this line on:\n{line}\n\
                 it prints:\n{printed}",
                args.join(" ")
            );
        }
    }
}
