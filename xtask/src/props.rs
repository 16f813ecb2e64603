//! `cargo xtask props [--cases N]`: the property suites of `properties/` (every invariant
//! over every correct algorithm, and the mutants each invariant must catch), with
//! `PROPTEST_CASES=N` (default 256, proptest's own default, sized for CI). Ends with a
//! table of the suites and how many cases each ran.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::tools::cargo;

/// Cases per suite when `--cases` is not given.
pub const DEFAULT_CASES: u32 = 256;

/// `cargo xtask props`'s options.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct PropsArgs {
    /// Cases per suite (PROPTEST_CASES)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CASES, value_parser = positive,
          allow_negative_numbers = true)]
    pub cases: u32,
}

/// A positive whole number; clap names the option and the value in front of the reason.
fn positive(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("expected a positive whole number (at most {})", u32::MAX)),
    }
}

/// Runs every property suite with `cases` cases each, then prints the table.
pub fn run(cases: u32) -> Result<()> {
    let mut cmd = cargo();
    cmd.args(["test", "-p", "properties", "--", "--show-output"]);
    run_commands(cases, vec![cmd])
}

/// Runs `suites` (cargo, or the suites' test executables) one after another with
/// `PROPTEST_CASES=cases`, then prints the table of what they all ran.
pub fn run_commands(cases: u32, suites: Vec<Command>) -> Result<()> {
    let mut names: Vec<String> = Vec::new();
    let mut results: Vec<String> = Vec::new();
    let mut failed = Vec::new();
    for mut cmd in suites {
        cmd.env("PROPTEST_CASES", cases.to_string());
        println!("$ PROPTEST_CASES={cases} {cmd:?}");
        let mut child = cmd.stdout(Stdio::piped()).spawn().with_context(|| format!("cannot start {cmd:?}"))?;
        if let Some(out) = child.stdout.take() {
            for line in BufReader::new(out).lines() {
                let line = line.context("reading the property suites' output")?;
                println!("{line}");
                if let Some(rest) = line.strip_prefix("properties: ") {
                    if !rest.contains("FAILED") {
                        names.push(rest.to_owned());
                    }
                } else if line.starts_with("test result:") {
                    results.push(line);
                }
            }
        }
        let status = child.wait().with_context(|| format!("waiting for {cmd:?}"))?;
        if !status.success() {
            failed.push(format!("{cmd:?} ({status})"));
        }
    }
    print_summary(cases, &names, &results);
    if !failed.is_empty() {
        bail!("property suites failed: {}; the shrunk schedules are printed above", failed.join(", "));
    }
    Ok(())
}

/// A table: one row per invariant, one column per algorithm, the cases each suite ran. The
/// columns are the algorithms the suites name, in the order they first report (xtask imports
/// no workspace crate, so it does not keep a list of its own).
fn print_summary(cases: u32, suites: &[String], results: &[String]) {
    let mut rows: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
    let mut algorithms: Vec<&str> = Vec::new();
    for s in suites {
        let words: Vec<&str> = s.split(' ').collect();
        if let [invariant, algorithm, n, "cases"] = words[..] {
            rows.entry(invariant).or_default().insert(algorithm, n);
            if !algorithms.contains(&algorithm) {
                algorithms.push(algorithm);
            }
        }
    }
    let caught = suites.iter().filter(|s| s.contains(" catches ") || s.contains(" finds ")).count();
    let held: usize = rows.values().map(BTreeMap::len).sum();
    println!("\nproperties: {held} suites held at {cases} cases each; {caught} known-bad state machines caught");
    print!("  {:<16}", "invariant");
    for a in &algorithms {
        print!(" {a:>14}");
    }
    println!();
    for (invariant, by_algorithm) in &rows {
        print!("  {invariant:<16}");
        for a in &algorithms {
            print!(" {:>14}", by_algorithm.get(a).copied().unwrap_or("-"));
        }
        println!();
    }
    for s in suites.iter().filter(|s| s.starts_with("accuracy ")) {
        println!("  {s}");
    }
    for r in results.iter().filter(|r| !r.contains(" 0 passed; 0 failed")) {
        println!("  {r}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `cargo xtask props` alone, as a command.
    #[derive(Debug, Parser)]
    struct Props {
        #[command(flatten)]
        args: PropsArgs,
    }

    fn parse(args: &[&str]) -> Result<u32, String> {
        let all = std::iter::once("props").chain(args.iter().copied());
        Props::try_parse_from(all).map(|p| p.args.cases).map_err(|e| e.to_string())
    }

    #[test]
    fn cases_default_and_explicit() {
        assert_eq!(parse(&[]), Ok(DEFAULT_CASES));
        assert_eq!(parse(&["--cases", "1000"]), Ok(1000));
        assert_eq!(parse(&["--cases=7"]), Ok(7));
    }

    #[test]
    fn bad_arguments_are_refused_by_name() {
        for (bad, said) in [
            (&["--cases"][..], &["--cases <N>", "a value is required"][..]),
            (&["--cases", "0"], &["--cases <N>", "'0'", "expected a positive whole number"]),
            (&["--cases", "-5"], &["--cases <N>", "'-5'", "expected a positive whole number"]),
            (&["--cases", "many"], &["--cases <N>", "'many'", "expected a positive whole number"]),
            (&["--seed", "1"], &["unexpected argument '--seed'"]),
        ] {
            let e = parse(bad).expect_err("refused");
            for part in said {
                assert!(e.contains(part), "the message for {bad:?} does not say {part:?}:\n{e}");
            }
        }
    }
}
