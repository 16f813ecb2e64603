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
    let t: in_process_goal::Timing = out.trim().parse().expect("a timing");
    assert!(t.ours_ns > 0.0 && t.governor_ns > 0.0 && t.ratio > 0.0, "{out}");
    assert!(t.ratio.is_finite(), "{out}");
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
