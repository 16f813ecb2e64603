//! The workspace's test executables, built once and run by `cargo xtask test` itself.
//!
//! Cargo resolves dependency features for the packages a command selects: `cargo test -p
//! redis-model` builds tokio, syn and a dozen more with other features than `cargo test
//! --workspace`, so every step that picked its own package or feature compiled its share of
//! the workspace again. Here one `cargo test --workspace --no-run` builds every test
//! executable with one resolution, and each step runs the executables it needs: with
//! valgrind in front, with the model standing in for redis-server, beside the others.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};

use crate::tools::{cargo, root};

/// Features every build of `cargo xtask test` enables, so that the build, the doc tests and
/// the gateway the tests build all resolve alike: the real lanes' slow test targets.
pub const FEATURES: &str = "sim/slow-tests";

/// The Redis module's shared library the test build made, handed to every test it runs (see
/// `MODULE_ENV`): the module's tests would otherwise build it again, with the dependency
/// features of its package alone (a minute and more of CI's time).
static MODULE: OnceLock<PathBuf> = OnceLock::new();

/// The variable `redis_tests::build_module` reads.
const MODULE_ENV: &str = "REDIS_RATELIMIT_MODULE";

/// One executable cargo built: a test harness (a crate's unit tests, `lib` or `bin`, or an
/// integration test, `test`) or a program the tests start (a `bin` or an `example`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executable {
    /// A test harness, not a program.
    pub test: bool,
    /// The package's folder, relative to the workspace root (`sim/model`, `tests`).
    pub package: String,
    /// `lib`, `bin` or `test`.
    pub kind: String,
    /// The target's name (`redis_model`, `agreement`).
    pub name: String,
    pub exe: PathBuf,
}

impl Executable {
    /// `package` `kind` `name`, e.g. `sim/model lib redis_model`.
    pub fn is(&self, package: &str, kind: &str, name: &str) -> bool {
        self.test && self.package == package && self.kind == kind && self.name == name
    }

    /// The executable as `cargo test` runs it: from its package's folder, which is where
    /// tests find their files, and with `CARGO` and `CARGO_MANIFEST_DIR` set.
    pub fn command(&self) -> Command {
        self.command_under(&[])
    }

    /// As [`Executable::command`], run by `wrapper` (e.g. valgrind and its options).
    pub fn command_under(&self, wrapper: &[&str]) -> Command {
        let dir = root().join(&self.package);
        let mut cmd = match wrapper {
            [program, options @ ..] => {
                let mut cmd = Command::new(program);
                cmd.args(options).arg(&self.exe);
                cmd
            }
            [] => Command::new(&self.exe),
        };
        cmd.current_dir(&dir).env("CARGO_MANIFEST_DIR", &dir);
        cmd.env("CARGO", std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        if let Some(module) = MODULE.get() {
            cmd.env(MODULE_ENV, module);
        }
        cmd
    }

    /// What a reader sees for it: `sim/model lib redis_model`.
    pub fn label(&self) -> String {
        format!("{} {} {}", self.package, self.kind, self.name)
    }
}

/// `cargo test --workspace --features FEATURES` with `args` (before `--`).
pub fn cargo_test(args: &[&str]) -> Command {
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--features", FEATURES]).args(args);
    cmd
}

/// Builds every test executable of the workspace and the programs the tests start (binaries,
/// examples) and lists them in the order cargo built them.
pub fn build() -> Result<Vec<Executable>> {
    let mut cmd = cargo_test(&["--no-run", "--message-format=json-render-diagnostics"]);
    println!("$ {cmd:?}");
    let mut child = cmd.stdout(Stdio::piped()).spawn().context("cannot start cargo test --no-run")?;
    let mut binaries = Vec::new();
    if let Some(out) = child.stdout.take() {
        let root = root();
        for line in BufReader::new(out).lines() {
            let line = line.context("reading cargo's messages")?;
            if let Some(binary) = parse_artifact(&line, &root) {
                binaries.push(binary);
            } else if let Some(module) = parse_module(&line) {
                let _ = MODULE.set(module);
            }
        }
    }
    let status = child.wait().context("waiting for cargo test --no-run")?;
    if !status.success() {
        bail!("building the tests failed ({status}); cargo's diagnostics are above");
    }
    if !binaries.iter().any(|b| b.test) {
        bail!("cargo built no test executable");
    }
    if MODULE.get().is_none() {
        bail!("the test build made no shared library of the Redis module (limiter/module's crate types?)");
    }
    Ok(binaries)
}

/// An executable of the workspace from one of cargo's JSON messages; None for every other
/// message (libraries, build scripts, dependencies).
fn parse_artifact(line: &str, root: &Path) -> Option<Executable> {
    let m: serde_json::Value = serde_json::from_str(line).ok()?;
    if m["reason"] != "compiler-artifact" {
        return None;
    }
    let exe = PathBuf::from(m["executable"].as_str()?);
    let manifest = Path::new(m["manifest_path"].as_str()?);
    let package = manifest.parent()?.strip_prefix(root).ok()?.to_string_lossy().into_owned();
    Some(Executable {
        test: m["profile"]["test"] == true,
        package,
        kind: m["target"]["kind"][0].as_str()?.to_owned(),
        name: m["target"]["name"].as_str()?.to_owned(),
        exe,
    })
}

/// The Redis module's shared library from one of cargo's JSON messages, when the message is
/// its build (not its unit tests').
fn parse_module(line: &str) -> Option<PathBuf> {
    let m: serde_json::Value = serde_json::from_str(line).ok()?;
    if m["reason"] != "compiler-artifact"
        || m["target"]["name"] != "redis_ratelimit_module"
        || m["profile"]["test"] != false
    {
        return None;
    }
    let files = m["filenames"].as_array()?;
    files.iter().filter_map(|f| f.as_str()).find(|f| f.ends_with(std::env::consts::DLL_SUFFIX)).map(PathBuf::from)
}

/// Takes the test harnesses `wanted` names (`(package, kind, name)`) out of `binaries`,
/// failing if one is missing: a test target renamed or moved must not silently drop out of
/// its step.
pub fn take(binaries: &mut Vec<Executable>, wanted: &[(&str, &str, &str)]) -> Result<Vec<Executable>> {
    for &(package, kind, name) in wanted {
        if !binaries.iter().any(|b| b.is(package, kind, name)) {
            bail!("no test executable {package} {kind} {name} was built (renamed or moved?)");
        }
    }
    let (taken, rest) =
        binaries.drain(..).partition(|b| wanted.iter().any(|&(package, kind, name)| b.is(package, kind, name)));
    *binaries = rest;
    Ok(taken)
}

/// The program `kind` `name` (a `bin` or an `example`) among what was built.
pub fn program<'a>(built: &'a [Executable], kind: &str, name: &str) -> Result<&'a Executable> {
    built
        .iter()
        .find(|b| !b.test && b.kind == kind && b.name == name)
        .with_context(|| format!("cargo test --no-run built no {kind} {name} (does a test still start it?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_of_test_targets_are_kept_and_everything_else_is_not() {
        let root = Path::new("/w");
        let test = r#"{"reason":"compiler-artifact","manifest_path":"/w/sim/model/Cargo.toml",
            "target":{"kind":["lib"],"name":"redis_model"},"profile":{"test":true},
            "executable":"/w/target/debug/deps/redis_model-1"}"#
            .replace('\n', "");
        assert_eq!(
            parse_artifact(&test, root),
            Some(Executable {
                test: true,
                package: "sim/model".into(),
                kind: "lib".into(),
                name: "redis_model".into(),
                exe: "/w/target/debug/deps/redis_model-1".into(),
            })
        );
        let program = test.replace(r#""test":true"#, r#""test":false"#);
        assert_eq!(parse_artifact(&program, root).map(|b| b.test), Some(false));
        // A library or build script (no executable), a dependency, other messages, other text.
        let no_exe = test.replace(r#""/w/target/debug/deps/redis_model-1""#, "null");
        let elsewhere = test.replace("/w/sim", "/registry/sim");
        for line in [no_exe.as_str(), &elsewhere, r#"{"reason":"build-finished","success":true}"#, "Compiling x"] {
            assert_eq!(parse_artifact(line, root), None, "{line}");
        }
    }

    #[test]
    fn the_modules_shared_library_is_found_among_its_files_and_its_unit_tests_are_not_it() {
        let lib = r#"{"reason":"compiler-artifact","target":{"kind":["cdylib","rlib"],"name":"redis_ratelimit_module"},
            "profile":{"test":false},"filenames":["/w/target/debug/deps/libredis_ratelimit_module.so",
            "/w/target/debug/deps/libredis_ratelimit_module.rlib"],"executable":null}"#
            .replace('\n', "");
        assert_eq!(parse_module(&lib), Some("/w/target/debug/deps/libredis_ratelimit_module.so".into()));
        let unit_tests = lib.replace(r#""test":false"#, r#""test":true"#);
        let other = lib.replace(r#""name":"redis_ratelimit_module""#, r#""name":"redis_model""#);
        let rlib_only = lib.replace(r#""/w/target/debug/deps/libredis_ratelimit_module.so","#, "");
        for line in [unit_tests, other, rlib_only] {
            assert_eq!(parse_module(&line), None, "{line}");
        }
    }

    #[test]
    fn taking_a_binary_that_was_not_built_names_it() {
        let b = |name: &str| Executable {
            test: true,
            package: "tests".into(),
            kind: "test".into(),
            name: name.into(),
            exe: name.into(),
        };
        let mut all = vec![b("agreement"), b("outage")];
        let taken = take(&mut all, &[("tests", "test", "outage")]).expect("built");
        assert_eq!((taken, all.clone()), (vec![b("outage")], vec![b("agreement")]));
        let e = take(&mut all, &[("tests", "test", "gone")]).expect_err("not built").to_string();
        assert!(e.contains("tests test gone"), "{e}");
        assert_eq!(all, [b("agreement")], "nothing is taken when one is missing");
    }
}
