//! The README shows a sample table under "What the output means". It must be what
//! `cargo xtask simulate` prints for that scenario with the default seed and duration, so
//! whoever changes the simulator's numbers updates the README too.

use sim::cli;
use sim_engine::subject::Subject;
use sim_engine::{run, scenario, table};

const README: &str = include_str!("../../README.md");

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
