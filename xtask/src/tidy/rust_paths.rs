//! Docs that cannot go stale: every backticked Rust path in the Markdown docs
//! (`redis_ratelimit::enforce::Enforcer`, `Limiter::check`, `sim_engine::promise`) names
//! something the code has, as every path to a file must exist. A renamed or moved item leaves
//! no sentence pointing at what is gone.
//!
//! A path is read as the code would: a first segment that is one of the workspace's crates
//! (`redis_ratelimit`, `sim_engine`, ...) starts there, and so does a module path with no crate
//! (`store::Tls`, tried in every crate); modules are followed through their files, and the
//! segments after the first item must each be defined in that crate (a function, a constant, a
//! variant, a field, an associated item). Paths into other projects' crates (`std::`,
//! `tokio::`, ...) are theirs to keep. The changelog names what was, and is not read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Crates outside the workspace whose paths the docs may name.
const FOREIGN: &[&str] = &[
    "std",
    "core",
    "alloc",
    "tokio",
    "redis",
    "http",
    "tower",
    "axum",
    "governor",
    "proptest",
    "turmoil",
    "mlua",
    "serde",
    "toml",
    "clap",
    "sfv",
    "ipnet",
    "ring",
    "rustls",
    "metrics",
    "tracing",
    "futures",
    "bytes",
    "redis_module",
    "plotters",
    "loom",
    "anyhow",
    "thiserror",
    "rand",
    "serde_json",
    // The standard library's types, named without their module.
    "Duration",
    "Instant",
    "SystemTime",
];

/// One workspace crate as the check reads it: its `src/` and every line of its sources.
struct Crate {
    src: PathBuf,
    text: String,
}

/// The workspace's crates by the name code uses for them (`redis_ratelimit`).
fn crates(root: &Path, packages: &[serde_json::Value]) -> BTreeMap<String, Crate> {
    let mut out = BTreeMap::new();
    for package in packages {
        let Some(dir) = super::package_dir(root, package) else { continue };
        let src = root.join(&dir).join("src");
        let mut files = Vec::new();
        super::names::rust_files(&src, &mut files);
        let text: String = files.iter().filter_map(|f| std::fs::read_to_string(f).ok()).collect::<Vec<_>>().join("\n");
        let name = package["name"].as_str().unwrap_or("?").replace('-', "_");
        out.insert(name, Crate { src, text });
    }
    out
}

/// The backticked spans of `line` that are Rust paths of two segments or more.
fn rust_paths(line: &str) -> Vec<&str> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(|span| span.trim_end_matches("()").trim_end_matches('!'))
        .filter(|span| {
            span.contains("::")
                && span.split("::").all(|seg| {
                    seg.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                        && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
        })
        .collect()
}

/// Whether the crate defines `name` as an item, an associated item, a variant or a field.
fn defines(krate: &Crate, name: &str) -> bool {
    const PREFIXES: &[&str] = &["pub(crate) ", "pub(super) ", "pub ", "async ", "const ", "unsafe "];
    const KEYWORDS: &[&str] =
        &["fn ", "const ", "static ", "struct ", "enum ", "union ", "trait ", "type ", "mod ", "macro_rules! "];
    let is_name = |rest: &str| {
        rest.strip_prefix(name).is_some_and(|after| !after.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    };
    krate.text.lines().any(|line| {
        let mut code = line.trim_start();
        if code.starts_with("//") {
            return false;
        }
        // A variant or a field: the name first on its line.
        let first = code.strip_prefix("pub ").unwrap_or(code);
        if first.strip_prefix(name).is_some_and(|after| {
            after.starts_with([',', '(', ':', '{']) || after.starts_with(" {") || after.starts_with(" =")
        }) {
            return true;
        }
        loop {
            if KEYWORDS.iter().any(|k| code.strip_prefix(k).is_some_and(is_name)) {
                return true;
            }
            match PREFIXES.iter().find_map(|p| code.strip_prefix(p)) {
                Some(rest) => code = rest,
                None => return false,
            }
        }
    })
}

/// Whether `segments` resolve in `krate`, from its root.
fn resolves_in(krate: &Crate, segments: &[&str]) -> bool {
    let mut dir = krate.src.clone();
    let mut rest = segments;
    // Modules, through their files.
    while let Some((first, after)) = rest.split_first() {
        let file = dir.join(format!("{first}.rs"));
        let folder = dir.join(first);
        if file.is_file() || folder.join("mod.rs").is_file() {
            dir = folder;
            rest = after;
        } else {
            break;
        }
    }
    rest.iter().all(|segment| defines(krate, segment))
}

/// Every backticked Rust path in the Markdown file at `path` that names nothing the code has.
pub(super) fn stale_rust_paths(root: &Path, packages: &[serde_json::Value], files: &[(String, String)]) -> Vec<String> {
    let crates = crates(root, packages);
    let mut problems = Vec::new();
    for (path, text) in files {
        // A changelog names what was.
        if !path.ends_with(".md") || path.ends_with(&["CHANGELOG", ".md"].concat()) {
            continue;
        }
        for (i, line) in text.lines().enumerate() {
            for named in rust_paths(line) {
                let segments: Vec<&str> = named.split("::").collect();
                let first = segments[0];
                if FOREIGN.contains(&first) {
                    continue;
                }
                let found = match (first, crates.get(first)) {
                    ("crate" | "self" | "super", _) => crates.values().any(|k| resolves_in(k, &segments[1..])),
                    (_, Some(krate)) => resolves_in(krate, &segments[1..]),
                    (_, None) => crates.values().any(|k| resolves_in(k, &segments)),
                };
                if !found {
                    problems.push(format!("{path}:{}: `{named}` names nothing the code has", i + 1));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backticked_paths_are_read_and_patterns_are_none() {
        assert_eq!(
            rust_paths("see `redis_ratelimit::Limiter`, `Limiter::check()`, `a::b!`, `x`, `q=1/2`, `a::<T>`"),
            ["redis_ratelimit::Limiter", "Limiter::check", "a::b"]
        );
    }

    #[test]
    fn a_path_resolves_through_modules_then_items() {
        let root = crate::tools::root();
        let krate = Crate {
            src: root.join("limiter/src"),
            text: "pub struct Limiter;\nimpl Limiter {\n    pub async fn check(&self) {}\n}\npub enum Source {\n    Store,\n}\n".into(),
        };
        assert!(resolves_in(&krate, &["Limiter", "check"]));
        assert!(resolves_in(&krate, &["store", "Source", "Store"]), "store is a module of the library");
        assert!(!resolves_in(&krate, &["Limiter", "check_everything"]));
        assert!(!resolves_in(&krate, &["promise"]));
    }
}
