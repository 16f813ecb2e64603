//! One name, one meaning: within one crate, no type name (a struct, enum, union, trait or type
//! alias) is defined twice. Two `Item`s in one crate make a reader ask which one a line means,
//! and a rename of one leaves the other looking like it. The glossary in
//! `docs/ARCHITECTURE.md` says what the project's words mean.
//!
//! Read from each crate's `src/` at module level (a trait's associated types, `type Error = …`
//! in an impl, are the trait's words, not the crate's). Two definitions that are each behind a
//! `#[cfg(…)]`, alternatives of one type for different builds, are one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every type name defined twice in one package's `src/`.
pub(super) fn duplicate_type_names(root: &Path, packages: &[serde_json::Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for package in packages {
        let Some(dir) = super::package_dir(root, package) else { continue };
        let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut files = Vec::new();
        rust_files(&root.join(&dir).join("src"), &mut files);
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            let shown = file.strip_prefix(root).unwrap_or(&file).to_string_lossy().replace('\\', "/");
            for (line, name) in type_definitions(&text) {
                defined.entry(name).or_default().push(format!("{shown}:{line}"));
            }
        }
        let crate_name = package["name"].as_str().unwrap_or("?");
        for (name, places) in defined.into_iter().filter(|(_, places)| places.len() > 1) {
            problems.push(format!("{crate_name}: the type name `{name}` is defined twice: {}", places.join(", ")));
        }
    }
    problems
}

/// Every `.rs` file under `dir`.
pub(super) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The type names `text` defines at module level (an item starting its line), with their line
/// numbers; one behind a `#[cfg(…)]` is left out when another behind one is its alternative.
fn type_definitions(text: &str) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String, bool)> = Vec::new();
    let mut previous = "";
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        if let Some(after) = rest.strip_prefix("pub") {
            rest = match after.strip_prefix('(') {
                Some(scoped) => scoped.split_once(')').map_or("", |(_, r)| r),
                None => after,
            };
            rest = rest.trim_start();
        }
        for keyword in ["struct ", "enum ", "union ", "trait ", "type "] {
            if let Some(after) = rest.strip_prefix(keyword) {
                let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                    found.push((i + 1, name, previous.starts_with("#[cfg(")));
                }
            }
        }
        if !line.trim().is_empty() {
            previous = line.trim();
        }
    }
    // Alternatives for different builds count once.
    let mut out: Vec<(usize, String)> = Vec::new();
    for (line, name, behind_cfg) in &found {
        let alternative = *behind_cfg && found.iter().any(|(l, n, c)| l < line && n == name && *c);
        if !alternative {
            out.push((*line, name.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_level_type_names_are_read_and_build_alternatives_count_once() {
        let text = "pub struct Item {\n}\nimpl X for Y {\n    type Error = E;\n}\npub(crate) enum Reply {}\n\
                    #[cfg(a)]\npub(crate) type Guard = A;\n#[cfg(not(a))]\npub(crate) type Guard = B;\ntrait Keys {}\n";
        let names: Vec<String> = type_definitions(text).into_iter().map(|(_, n)| n).collect();
        assert_eq!(names, ["Item", "Reply", "Guard", "Keys"]);
    }
}
