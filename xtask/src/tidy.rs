//! `cargo xtask tidy`: the invariants of `docs/ARCHITECTURE.md` that code can check, run over
//! the whole repository. It also runs as a test of this crate, so `cargo test` keeps them.
//!
//! - crate imports: every workspace dependency edge is one the architecture allows, and the
//!   library pulls in none of the harness's simulation crates;
//! - no file circles: within a crate, no two files import each other, directly or around a
//!   loop ([`circles`]);
//! - publication: the crates for users ([`crate::PUBLISHED`]) carry what the registry shows and
//!   depend on nothing unpublished, and every other crate stays unpublished;
//! - `unsafe` code only in the model's Lua bridge, and every other crate root forbids it;
//! - the wall clock read only where the architecture allows it to be;
//! - no machine paths, no references to documents the repository does not contain, and no path
//!   in the docs or a comment that names a file or folder the repository does not have;
//! - no test marked ignored or expected to panic (a test either runs or is deleted);
//! - no source file past about 600 lines unless it holds one concern, named in [`LONG_FILES`];
//! - one list of algorithms: no array of them sized by hand, no `matches!` over them
//!   ([`algorithms`]);
//! - one name, one meaning: no type name defined twice in one crate ([`names`]);
//! - every backticked Rust path in the docs names something the code has ([`rust_paths`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::tools::root;

mod algorithms;
mod circles;
mod names;
mod rust_paths;

/// The heading of the table in `docs/ARCHITECTURE.md` that says what each workspace crate may
/// depend on (normal, dev and build dependencies alike). Tidy reads the document itself, so the
/// table a reader sees is the one the code is held to.
const IMPORTS_HEADING: &str = "### What each crate may import";

/// Crates the library must never pull in: they belong to the harness.
const NOT_IN_THE_LIBRARY: &[&str] = &["turmoil", "mlua", "rand", "mini-redis", "proptest", "loom"];

/// The one module allowed `unsafe` code.
const UNSAFE_MODULE: &str = "sim/model/src/lua_stack.rs";

/// Source files longer than [`LONG_FILE_LINES`], each with the one concern it holds.
const LONG_FILES: &[(&str, &str)] = &[
    (UNSAFE_MODULE, "the fenced bridge to Lua's C API: one module so its unsafe code stays in one place"),
    ("sim/model/src/num.rs", "Redis's number parsing and printing, one family of routines"),
    ("sim/model/src/script.rs", "EVAL/EVALSHA: the Lua sandbox and the script cache"),
];
const LONG_FILE_LINES: usize = 600;

/// Runs every check; `Err` lists every problem found.
pub fn run() -> Result<()> {
    let problems = check(&root())?;
    if !problems.is_empty() {
        bail!("tidy found {} problem(s):\n  {}", problems.len(), problems.join("\n  "));
    }
    println!(
        "tidy: crate imports, file circles, unsafe code, clocks, paths, references, tests, file sizes, the list of \
         algorithms and type names are in order"
    );
    Ok(())
}

/// Every problem in the repository at `root`.
pub fn check(root: &Path) -> Result<Vec<String>> {
    let packages = workspace_packages(root)?;
    let mut problems = crate_imports(root, &packages);
    problems.extend(circles::file_circles(root, &packages));
    problems.extend(names::duplicate_type_names(root, &packages));
    problems.extend(publication(&packages));
    let mut docs = Vec::new();
    for file in source_files(root)? {
        let text = match std::fs::read_to_string(root.join(&file)) {
            Ok(text) => text,
            // Not text (a picture, a font): nothing to check.
            Err(_) => continue,
        };
        let path = file.to_string_lossy().replace('\\', "/");
        problems.extend(check_file(root, &path, &text));
        if path.ends_with(".md") {
            docs.push((path, text));
        }
    }
    problems.extend(rust_paths::stale_rust_paths(root, &packages, &docs));
    problems.extend(crate_roots_forbid_unsafe(root, &packages));
    for (path, _) in LONG_FILES {
        if !root.join(path).is_file() {
            problems.push(format!("{path} is in tidy's LONG_FILES but does not exist"));
        }
    }
    Ok(problems)
}

/// The checks of one text file at `path` (relative to the root, with `/`).
fn check_file(root: &Path, path: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let is_rust = path.ends_with(".rs");
    if is_rust {
        problems.extend(unsafe_outside_the_bridge(path, text));
        problems.extend(wall_clock_opt_outs(path, text));
        problems.extend(banned_test_attributes(path, text));
        problems.extend(long_file(path, text));
        problems.extend(algorithms::hand_sized_lists(path, text));
    }
    problems.extend(machine_paths(path, text));
    problems.extend(outside_references(root, path, text));
    if is_rust || path.ends_with(".md") {
        problems.extend(missing_paths(root, path, text));
    }
    problems
}

// --------------------------------------------------------------------------------- imports

/// The workspace's packages, as `cargo metadata` describes them.
fn workspace_packages(root: &Path) -> Result<Vec<serde_json::Value>> {
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("cannot run cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).context("cargo metadata's output")?;
    metadata["packages"].as_array().cloned().context("cargo metadata lists no packages")
}

/// A package's folder, relative to the root (`limiter` for `redis-ratelimit`).
fn package_dir(root: &Path, package: &serde_json::Value) -> Option<PathBuf> {
    let manifest = Path::new(package["manifest_path"].as_str()?);
    let dir = manifest.parent()?;
    let root = root.canonicalize().ok()?;
    let dir = dir.canonicalize().ok()?;
    dir.strip_prefix(&root).ok().map(Path::to_path_buf)
}

/// The rows of the imports table: each crate (the first name in backticks of its row) and every
/// name in backticks of the row's second cell ("none" names none). Names there that are not
/// crates (a feature, a binary) allow nothing that exists.
fn allowed_imports(architecture: &str) -> Vec<(String, Vec<String>)> {
    let ticked = |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
    architecture
        .lines()
        .skip_while(|l| l.trim() != IMPORTS_HEADING)
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let name = ticked(cells.get(1)?).into_iter().next()?;
            Some((name, ticked(cells.get(2)?)))
        })
        .collect()
}

/// Whether the only feature of `package` that turns on its optional `loom` is `loom` itself.
fn loom_feature_only(package: &serde_json::Value) -> bool {
    let Some(features) = package["features"].as_object() else { return false };
    features.iter().all(|(feature, enables)| {
        let turns_on_loom = enables.as_array().into_iter().flatten().any(|e| e == "dep:loom" || e == "loom");
        feature == "loom" || !turns_on_loom
    })
}

fn crate_imports(root: &Path, packages: &[serde_json::Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let architecture = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap_or_default();
    let table = allowed_imports(&architecture);
    if table.is_empty() {
        problems.push(format!("docs/ARCHITECTURE.md has no table under {IMPORTS_HEADING:?}"));
    }
    for package in packages {
        let name = package["name"].as_str().unwrap_or("?");
        let Some((_, allowed)) = table.iter().find(|(n, _)| n == name) else {
            problems.push(format!("crate `{name}` has no row in the imports table of docs/ARCHITECTURE.md"));
            continue;
        };
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or("?");
            let workspace_crate = dep.get("path").is_some_and(|p| !p.is_null());
            if workspace_crate && !allowed.iter().any(|a| a == dep_name) {
                problems
                    .push(format!("crate `{name}` depends on `{dep_name}`, which docs/ARCHITECTURE.md does not allow"));
            }
            // Normal dependencies on every platform; the loom models add loom as an optional
            // dependency, which only their own feature `loom` turns on.
            let everywhere = dep["kind"].is_null() && dep["target"].is_null();
            let loom_models_only = dep_name == "loom" && dep["optional"] == true && loom_feature_only(package);
            if name == "redis-ratelimit" && everywhere && NOT_IN_THE_LIBRARY.contains(&dep_name) && !loom_models_only {
                problems.push(format!("the library depends on `{dep_name}`, a crate of the harness"));
            }
        }
    }
    problems
}

// ----------------------------------------------------------------------------- publication

/// What a published crate's page on the registry and on docs.rs is made of.
const PUBLISHED_FIELDS: &[&str] = &["description", "license", "readme", "documentation", "rust_version"];

fn publication(packages: &[serde_json::Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for package in packages {
        let name = package["name"].as_str().unwrap_or("?");
        // `cargo metadata` gives `publish` as null for "anywhere" and `[]` for `publish = false`.
        let publishable = package["publish"].is_null();
        let meant = crate::PUBLISHED.contains(&name);
        if publishable != meant {
            problems.push(if meant {
                format!("crate `{name}` is for users (xtask's PUBLISHED) but its manifest says publish = false")
            } else {
                format!("crate `{name}` is the harness's but its manifest lets it be published")
            });
        }
        if !meant {
            continue;
        }
        for field in PUBLISHED_FIELDS {
            if package[field].as_str().is_none_or(str::is_empty) {
                problems.push(format!("published crate `{name}` has no `{}`", field.replace('_', "-")));
            }
        }
        for list in ["keywords", "categories"] {
            if package[list].as_array().is_none_or(Vec::is_empty) {
                problems.push(format!("published crate `{name}` has no `{list}`"));
            }
        }
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or("?");
            let workspace_crate = dep.get("path").is_some_and(|p| !p.is_null());
            let shipped = dep["kind"].is_null() || dep["kind"] == "build";
            if workspace_crate && shipped && !crate::PUBLISHED.contains(&dep_name) {
                problems.push(format!("published crate `{name}` depends on `{dep_name}`, which is not published"));
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------- unsafe

/// The code part of a line: everything before a `//` comment.
fn code_of(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

fn unsafe_outside_the_bridge(path: &str, text: &str) -> Vec<String> {
    if path == UNSAFE_MODULE {
        return Vec::new();
    }
    // Spelled in two halves so this file does not match itself.
    let word = ["un", "safe"].concat();
    let patterns =
        [format!("{word} {{"), format!("{word} fn "), format!("{word} impl "), format!("allow({word}_code)")];
    text.lines()
        .enumerate()
        .filter(|(_, line)| patterns.iter().any(|p| code_of(line).contains(p.as_str())))
        .map(|(i, _)| format!("{path}:{}: `{word}` code outside {UNSAFE_MODULE}", i + 1))
        .collect()
}

fn crate_roots_forbid_unsafe(root: &Path, packages: &[serde_json::Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let forbid = ["#![forbid(un", "safe_code)]"].concat();
    for package in packages {
        let Some(dir) = package_dir(root, package) else {
            problems.push(format!("crate `{}` lives outside the repository", package["name"].as_str().unwrap_or("?")));
            continue;
        };
        let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"].iter().map(|f| dir.join(f)).collect();
        if let Ok(bins) = std::fs::read_dir(root.join(&dir).join("src/bin")) {
            roots.extend(bins.flatten().map(|e| dir.join("src/bin").join(e.file_name())));
        }
        for file in roots {
            let Ok(text) = std::fs::read_to_string(root.join(&file)) else { continue };
            // The model's crate denies unsafe code (workspace lint) and lets its one bridge
            // module allow it; forbid would not let that module opt out.
            if file == Path::new("sim/model/src/lib.rs") {
                continue;
            }
            if !text.contains(&forbid) {
                problems.push(format!("{}: crate root without {forbid}", file.display()));
            }
        }
    }
    problems
}

// ----------------------------------------------------------------------------------- clocks

/// Where reading the wall clock is the point: the clock modules, benches (they measure real
/// time) and the tests against real `redis-server` (whose clock is real): the `tests` crate's,
/// the simulator's real-lane tests (`sim/real/tests/`, `sim/tests/real_*.rs`), the rate limit
/// service's (`limiter/server/tests/`, a real Redis and a real gRPC listener), and xtask,
/// which says how long each step of `cargo xtask test` took.
fn may_read_the_wall_clock(path: &str) -> bool {
    path.ends_with("clock.rs")
        || path.contains("/benches/")
        || path.starts_with("tests/tests/")
        || path.starts_with("sim/real/tests/")
        || path.starts_with("sim/tests/real_")
        || path.starts_with("limiter/server/tests/")
        || path.starts_with("xtask/")
}

fn wall_clock_opt_outs(path: &str, text: &str) -> Vec<String> {
    let opt_out = ["clippy::disallowed", "_methods"].concat();
    if may_read_the_wall_clock(path) || !text.contains(&opt_out) {
        return Vec::new();
    }
    vec![format!(
        "{path}: opts out of {opt_out} (reads the wall clock) outside a clock module, a bench, a real-Redis test or xtask"
    )]
}

// ------------------------------------------------------------------------------ tests, size

fn banned_test_attributes(path: &str, text: &str) -> Vec<String> {
    let banned = [["#[ig", "nore"].concat(), ["#[should", "_panic"].concat()];
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let found = banned.iter().find(|b| code_of(line).contains(b.as_str()))?;
            Some(format!("{path}:{}: {found}] hides a test's outcome; assert the behaviour instead", i + 1))
        })
        .collect()
}

fn long_file(path: &str, text: &str) -> Vec<String> {
    let lines = text.lines().count();
    let listed = LONG_FILES.iter().any(|(p, _)| *p == path);
    if lines > LONG_FILE_LINES && !listed {
        return vec![format!(
            "{path}: {lines} lines; split it by concern, or name its one concern in tidy's LONG_FILES"
        )];
    }
    if listed && lines <= LONG_FILE_LINES {
        return vec![format!("{path}: {lines} lines, no longer long: drop it from tidy's LONG_FILES")];
    }
    Vec::new()
}

// ------------------------------------------------------------------------ paths, references

fn machine_paths(path: &str, text: &str) -> Vec<String> {
    let prefixes =
        [["/wo", "rk/"].concat(), ["/ro", "ot/"].concat(), ["/ho", "me/"].concat(), ["/Us", "ers/"].concat()];
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let found = prefixes.iter().find(|p| line.contains(p.as_str()))?;
            Some(format!("{path}:{}: a machine path ({found}...); the repository speaks only of itself", i + 1))
        })
        .collect()
}

/// Every markdown file another file mentions by name must be a file of the repository: next to the mentioning
/// file, at the root, or under `docs/`.
fn outside_references(root: &Path, path: &str, text: &str) -> Vec<String> {
    let dir = Path::new(path).parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for reference in markdown_names(line) {
            let candidates = [dir.join(&reference), PathBuf::from(&reference), Path::new("docs").join(&reference)];
            if !candidates.iter().any(|c| root.join(c).is_file()) {
                problems
                    .push(format!("{path}:{}: refers to {reference}, which the repository does not contain", i + 1));
            }
        }
    }
    problems
}

/// The top-level folders a path in the docs or a comment starts from.
const TOP_LEVEL: &[&str] =
    &["limiter/", "sim/", "properties/", "reports/", "lua/", "tests/", "xtask/", "docs/", ".ci/"];

/// Every path of the repository that a document or a comment names (`sim/engine/src/oracle.rs`,
/// `docs/`) must exist, from the root or from a folder the file is in (a crate's own
/// `tests/`, as `properties/` names its suites): a file that moved leaves no sentence pointing where it was. In Rust files
/// only comments are read (a test's string may name a file it makes up).
fn missing_paths(root: &Path, path: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let prose = if path.ends_with(".rs") {
            match line.find("//") {
                Some(at) => &line[at..],
                None => continue,
            }
        } else {
            line
        };
        for named in repository_paths(prose) {
            // From the root, or from a folder the file is in (its crate's `tests/`, say).
            let mut bases = Path::new(path).ancestors().skip(1);
            if !bases.any(|base| root.join(base).join(&named).exists()) {
                problems.push(format!("{path}:{}: names {named}, which the repository does not contain", i + 1));
            }
        }
    }
    problems
}

/// The repository paths in a line: words starting with a top-level folder, up to the first
/// character no path here has, without trailing punctuation. Patterns (`*`, `{`, `<`, `N`) are
/// no paths.
fn repository_paths(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = line.as_bytes();
    for top in TOP_LEVEL {
        let mut from = 0;
        while let Some(at) = line[from..].find(top) {
            let start = from + at;
            from = start + top.len();
            let before = start.checked_sub(1).map(|b| bytes[b]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'/' | b'.' | b':')) {
                continue;
            }
            let end = line[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')))
                .map_or(line.len(), |e| start + e);
            let next = line[end..].chars().next();
            if matches!(next, Some('*' | '{' | '<' | '$')) {
                continue;
            }
            let named = line[start..end].trim_end_matches(['.', ',', ':']);
            out.push((start, named.to_owned()));
        }
    }
    out.sort();
    out.into_iter().map(|(_, named)| named).collect()
}

/// The `….md` names in a line (letters, digits, `_`, `-`, `.` and `/` before `.md`).
fn markdown_names(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes = line.as_bytes();
    let mut from = 0;
    while let Some(at) = line[from..].find(".md") {
        let end = from + at + 3;
        let after_ok = bytes.get(end).is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'));
        let mut start = from + at;
        while start > 0
            && matches!(bytes[start - 1], b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'/')
        {
            start -= 1;
        }
        let name = line[start..end].trim_start_matches("./");
        if after_ok && name.len() > 3 && !name.starts_with('/') && !name.contains("://") {
            names.push(name.to_owned());
        }
        from = end;
    }
    names
}

// ------------------------------------------------------------------------------------ files

/// Every file of the repository, relative to `root`, but build output and Git's own.
fn source_files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(root.join(&dir)).with_context(|| format!("cannot list {}", dir.display()))?;
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let relative = dir.join(&name);
            // `.git` is a directory in a clone but a file in a git worktree (it names the real
            // git directory, a machine path): either way it is not the repository's text.
            if name == ".git" {
                continue;
            }
            if entry.file_type()?.is_dir() {
                if name != "target" {
                    stack.push(relative);
                }
            } else if name != ".git" {
                // In a git worktree `.git` is a file naming where the repository lives.
                out.push(relative);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_keeps_its_architecture_invariants() {
        let problems = check(&root()).expect("tidy runs");
        assert!(problems.is_empty(), "tidy found:\n  {}", problems.join("\n  "));
    }

    #[test]
    fn the_imports_table_is_read_from_the_document() {
        let doc = "# A\n\n### What each crate may import\n\n| crate | may depend on |\n|---|---|\n\
                   | `lib` (`limiter/`) | none |\n| `sim` | `lib` (feature `harness`); tests: `model` |\n\nafter\n| `x` | `y` |\n";
        let table = allowed_imports(doc);
        let names: Vec<&str> = table.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["lib", "sim"], "the header row and rows after the table are no crates");
        assert!(table[0].1.is_empty());
        assert_eq!(table[1].1, ["lib", "harness", "model"]);
        assert!(allowed_imports("no table here").is_empty());
    }

    #[test]
    fn unsafe_code_is_found_outside_the_bridge_only() {
        let word = ["un", "safe"].concat();
        let code = format!("fn f() {{ {word} {{ g() }} }}\n// {word} {{ in a comment }}\n");
        assert_eq!(unsafe_outside_the_bridge("sim/src/x.rs", &code).len(), 1);
        assert!(unsafe_outside_the_bridge(UNSAFE_MODULE, &code).is_empty());
    }

    #[test]
    fn wall_clock_opt_outs_are_allowed_in_clocks_benches_and_real_redis_tests_only() {
        let text = ["#![allow(clippy::disallowed", "_methods)]"].concat();
        assert!(wall_clock_opt_outs("sim/real/src/clock.rs", &text).is_empty());
        assert!(wall_clock_opt_outs("sim/benches/simulate.rs", &text).is_empty());
        assert!(wall_clock_opt_outs("tests/tests/outage.rs", &text).is_empty());
        assert!(wall_clock_opt_outs("sim/tests/real_catalogue.rs", &text).is_empty());
        assert_eq!(wall_clock_opt_outs("sim/engine/src/turmoil_run.rs", &text).len(), 1);
        assert_eq!(wall_clock_opt_outs("sim/tests/scenarios.rs", &text).len(), 1);
    }

    #[test]
    fn machine_paths_and_missing_documents_are_reported() {
        let home = ["/ho", "me/someone/project"].concat();
        assert_eq!(machine_paths("README.md", &format!("see {home}")).len(), 1);
        let root = root();
        let missing = ["DESIGN", ".", "md"].concat();
        assert_eq!(outside_references(&root, "sim/engine/src/checker.rs", &format!("see {missing}'s table")).len(), 1);
        assert!(outside_references(&root, "sim/engine/src/checker.rs", "see docs/ARCHITECTURE.md").is_empty());
        assert!(outside_references(&root, "README.md", "as `docs/ORIGINS.md` says").is_empty());
    }

    #[test]
    fn repository_paths_are_cut_out_of_their_line_and_patterns_are_none() {
        assert_eq!(
            repository_paths("see `sim/engine/src/oracle.rs`, then docs/. Also lua/gcra.lua: here"),
            ["sim/engine/src/oracle.rs", "docs/", "lua/gcra.lua"]
        );
        assert!(repository_paths("sim/subjects/*.toml, tests/tests/{a,b}.rs, foo/sim/x, ../sim/x").is_empty());
        let root = root();
        let made_up = ["sim/src/made", "-up.rs"].concat();
        let doc = ["x", ".md"].concat();
        assert_eq!(missing_paths(&root, &doc, &format!("see `{made_up}` and docs/ARCHITECTURE.md")).len(), 1);
        assert!(missing_paths(&root, "x.rs", &format!("let p = \"{made_up}\"; /{}/ see docs/", "")).is_empty());
        assert_eq!(missing_paths(&root, "x.rs", &format!("/{}/ see {made_up}", "")).len(), 1);
        let crate_relative = format!("/{}/ the suites are {}", "", ["tests/", "suite/"].concat());
        assert!(missing_paths(&root, "properties/src/lib.rs", &crate_relative).is_empty());
    }

    #[test]
    fn markdown_names_are_cut_out_of_their_line() {
        assert_eq!(
            markdown_names("(see `docs/ARCHITECTURE.md`), then README.md."),
            ["docs/ARCHITECTURE.md", "README.md"]
        );
        assert!(markdown_names("a .md file, https://example.org/x.md, x.mdx").is_empty());
    }

    #[test]
    fn ignored_and_should_panic_tests_are_refused() {
        let text = [["#[ig", "nore]"].concat(), ["#[should", "_panic]"].concat()].join("\n");
        assert_eq!(banned_test_attributes("x.rs", &text).len(), 2);
    }

    #[test]
    fn long_files_need_their_one_concern_named() {
        let long = "x\n".repeat(LONG_FILE_LINES + 1);
        assert_eq!(long_file("sim/src/new.rs", &long).len(), 1);
        assert!(long_file(UNSAFE_MODULE, &long).is_empty());
        assert_eq!(long_file(UNSAFE_MODULE, "short\n").len(), 1);
    }
}
