//! `cargo xtask props [--cases N]`: the property suites of `properties/` (every invariant
//! over every correct algorithm, and the mutants each invariant must catch), with
//! `PROPTEST_CASES=N` (default 256, proptest's own default, sized for CI). Ends with a
//! table of the suites and how many cases each ran.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

use anyhow::{bail, Context, Result};

use crate::tools::cargo;

/// Cases per suite when `--cases` is not given.
pub const DEFAULT_CASES: u32 = 256;

const USAGE: &str = "usage: cargo xtask props [--cases N]   (N: cases per suite, a positive integer; default 256)";

/// Parses `[--cases N]`.
fn parse(args: &[String]) -> Result<u32> {
    let mut cases = DEFAULT_CASES;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let value = match arg.as_str() {
            "--cases" => it.next().with_context(|| format!("`--cases` needs a number\n{USAGE}"))?.as_str(),
            other => match other.strip_prefix("--cases=") {
                Some(v) => v,
                None if other == "-h" || other == "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                None => bail!("unknown argument {other:?}\n{USAGE}"),
            },
        };
        cases = match value.parse::<u32>() {
            Ok(n) if n > 0 => n,
            _ => bail!("`--cases` takes a positive integer, got {value:?}\n{USAGE}"),
        };
    }
    Ok(cases)
}

pub fn run(args: &[String]) -> Result<()> {
    let cases = parse(args)?;
    let mut cmd = cargo();
    cmd.args(["test", "-p", "properties", "--", "--show-output"]).env("PROPTEST_CASES", cases.to_string());
    println!("$ PROPTEST_CASES={cases} {cmd:?}");
    let mut child = cmd.stdout(Stdio::piped()).spawn().context("cannot start cargo test -p properties")?;
    let mut suites: Vec<String> = Vec::new();
    let mut results: Vec<String> = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line.context("reading cargo test's output")?;
            println!("{line}");
            if let Some(rest) = line.strip_prefix("properties: ") {
                if !rest.contains("FAILED") {
                    suites.push(rest.to_owned());
                }
            } else if line.starts_with("test result:") {
                results.push(line);
            }
        }
    }
    let status = child.wait().context("waiting for cargo test -p properties")?;
    print_summary(cases, &suites, &results);
    if !status.success() {
        bail!("property suites failed ({status}); the shrunk schedules are printed above");
    }
    Ok(())
}

/// A table: one row per invariant, one column per algorithm, the cases each suite ran.
fn print_summary(cases: u32, suites: &[String], results: &[String]) {
    const ALGORITHMS: [&str; 5] = ["fixed-window", "sliding-window", "sliding-log", "token-bucket", "gcra"];
    let mut rows: BTreeMap<&str, BTreeMap<&str, &str>> = BTreeMap::new();
    for s in suites {
        let words: Vec<&str> = s.split(' ').collect();
        if let [invariant, algorithm, n, "cases"] = words[..] {
            rows.entry(invariant).or_default().insert(algorithm, n);
        }
    }
    let caught = suites.iter().filter(|s| s.contains(" catches ") || s.contains(" finds ")).count();
    let held: usize = rows.values().map(BTreeMap::len).sum();
    println!("\nproperties: {held} suites held at {cases} cases each; {caught} known-bad state machines caught");
    print!("  {:<16}", "invariant");
    for a in ALGORITHMS {
        print!(" {a:>14}");
    }
    println!();
    for (invariant, by_algorithm) in &rows {
        print!("  {invariant:<16}");
        for a in ALGORITHMS {
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

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cases_default_and_explicit() {
        assert_eq!(parse(&args(&[])).unwrap(), DEFAULT_CASES);
        assert_eq!(parse(&args(&["--cases", "1000"])).unwrap(), 1000);
        assert_eq!(parse(&args(&["--cases=7"])).unwrap(), 7);
    }

    #[test]
    fn bad_arguments_are_refused_by_name() {
        for bad in [&["--cases"][..], &["--cases", "0"], &["--cases", "many"], &["--seed", "1"]] {
            let e = parse(&args(bad)).unwrap_err().to_string();
            assert!(e.contains("cases") || e.contains("unknown argument"), "{e}");
        }
    }
}
