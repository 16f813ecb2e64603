//! The executable the goals bench runs: its report parses, and a bad command line is refused
//! with what was wrong.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_in-process-goal")).args(args).output().expect("it starts");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn a_timing_reports_the_median_ratio_and_each_sides_nanoseconds() {
    let (ok, out, err) = run(&["time", "1000", "3000"]);
    assert!(ok, "{err}");
    let field = |name: &str| -> f64 {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {out:?}"))
    };
    let (ratio, ours, theirs) = (field("ratio"), field("ours_ns"), field("governor_ns"));
    assert!(ours > 0.0 && theirs > 0.0 && ratio > 0.0, "{out}");
    assert!(ratio.is_finite(), "{out}");
}

#[test]
fn a_bad_command_line_is_refused_saying_what_was_wrong() {
    for (args, says) in [
        (&[][..], "usage"),
        (&["time"][..], "KEYS is missing"),
        (&["time", "0", "10"][..], "KEYS must be a positive whole number, not \"0\""),
        (&["time", "10", "ten"][..], "OPERATIONS must be a positive whole number, not \"ten\""),
        (&["count", "both"][..], "ours or governor, not \"both\""),
        (&["count"][..], "ours or governor; usage"),
        (&["measure"][..], "usage"),
    ] {
        let (ok, _, err) = run(args);
        assert!(!ok, "{args:?} was accepted");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
