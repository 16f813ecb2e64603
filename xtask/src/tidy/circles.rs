//! No file circles: within one crate, no two source files reach each other through `crate::`
//! paths. A circle means neither file can be read, changed or moved without the other; the cure
//! is to move what both need into a file of its own, or to the one that owns it.
//!
//! The graph is drawn from `crate::` paths in code (comments are left out, test modules are
//! not): each path names the file of the longest module prefix it starts with. Paths to the
//! crate root (its re-exports) and between a module and its own submodules (a parent and its
//! children are one unit, `super::` is how a child reads its parent) draw no edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every circle among the source files of each package's library or binary under `src/`.
pub(super) fn file_circles(root: &Path, packages: &[serde_json::Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for package in packages {
        let Some(dir) = super::package_dir(root, package) else { continue };
        let src = root.join(&dir).join("src");
        let mut files = BTreeMap::new();
        collect(root, &src, &src, &mut files);
        let name = package["name"].as_str().unwrap_or("?");
        for circle in circles(&files) {
            let shown: Vec<String> = circle.iter().map(|m| files[m].0.clone()).collect();
            problems.push(format!("{name}: these files import each other in a circle: {}", shown.join(", ")));
        }
    }
    problems
}

/// Each file's module path (`["subject", "file"]` for `subject/file.rs`), with the file's path
/// from the repository's root and its text.
type Files = BTreeMap<Vec<String>, (String, String)>;

/// The module files under `dir`, keyed by module path; `src/bin/` holds other crates.
fn collect(root: &Path, src: &Path, dir: &Path, files: &mut Files) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path != src.join("bin") {
                collect(root, src, &path, files);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let Ok(relative) = path.strip_prefix(src) else { continue };
            let mut module: Vec<String> =
                relative.with_extension("").iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                module.pop();
            }
            if let Ok(text) = std::fs::read_to_string(&path) {
                let shown = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
                files.insert(module, (shown, text));
            }
        }
    }
}

/// The groups of files (two or more) that reach each other, each sorted, in order.
fn circles(files: &Files) -> Vec<Vec<Vec<String>>> {
    let edges: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> =
        files.iter().map(|(m, (_, text))| (m, imports(files, m, text))).collect();
    let reach = |from: &Vec<String>| -> BTreeSet<&Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<&Vec<String>> = edges[from].iter().copied().collect();
        while let Some(m) = stack.pop() {
            if seen.insert(m) {
                stack.extend(edges[m].iter().copied());
            }
        }
        seen
    };
    let reaches: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> = files.keys().map(|m| (m, reach(m))).collect();
    let mut grouped = BTreeSet::new();
    let mut out = Vec::new();
    for m in files.keys() {
        if grouped.contains(m) || !reaches[m].contains(m) {
            continue;
        }
        let group: Vec<Vec<String>> =
            files.keys().filter(|o| reaches[m].contains(o) && reaches[*o].contains(m)).cloned().collect();
        grouped.extend(group.iter().cloned());
        if group.len() > 1 {
            out.push(group);
        }
    }
    out
}

/// The files `module` (whose text is `text`) imports through `crate::` paths.
fn imports<'a>(files: &'a Files, module: &[String], text: &str) -> BTreeSet<&'a Vec<String>> {
    let code: String = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        // `$crate::` in a macro and `some_crate::` are other crates' paths.
        if code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        for path in paths(&code[at + "crate::".len()..]) {
            let target =
                (1..=path.len()).rev().map(|n| &path[..n]).find_map(|p| files.get_key_value(p).map(|(k, _)| k));
            let Some(target) = target else { continue };
            let related = target.starts_with(module) || module.starts_with(target);
            if !related {
                out.insert(target);
            }
        }
    }
    out
}

/// The paths written at the start of `s`: `a::b::C` is one, `a::{b, c::{D, E}}` four.
fn paths(s: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    group(s, &mut Vec::new(), &mut out);
    out
}

/// Reads one path (with its braces) from `s` after `prefix`, pushing every full path found;
/// returns how much of `s` it read.
fn group(s: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut i = 0;
    let depth = prefix.len();
    loop {
        let rest = &s[i..];
        let ident = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if ident > 0 {
            prefix.push(rest[..ident].to_owned());
            i += ident;
        }
        let rest = &s[i..];
        // `a::{...}`, or a group right after `crate::` (`crate::{a::B, c::D}`).
        let opens = if rest.starts_with("::{") { 3 } else { usize::from(ident == 0 && rest.starts_with('{')) };
        if opens > 0 {
            i += opens;
            loop {
                i += s[i..].len() - s[i..].trim_start().len();
                i += group(&s[i..], prefix, out);
                i += s[i..].len() - s[i..].trim_start().len();
                if s[i..].starts_with(',') {
                    i += 1;
                } else {
                    if s[i..].starts_with('}') {
                        i += 1;
                    }
                    break;
                }
            }
            break;
        } else if rest.starts_with("::") {
            i += 2;
        } else {
            if prefix.len() > depth {
                out.push(prefix.clone());
            }
            break;
        }
    }
    prefix.truncate(depth);
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(path: &str) -> Vec<String> {
        path.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect()
    }

    #[test]
    fn grouped_paths_are_read_whole() {
        let got = paths("alpha::{beta::Gamma, delta::{Eps, zeta}, Eta};\nrest");
        let want: Vec<Vec<String>> =
            ["alpha/beta/Gamma", "alpha/delta/Eps", "alpha/delta/zeta", "alpha/Eta"].into_iter().map(module).collect();
        assert_eq!(got, want);
        assert_eq!(paths("alpha::Beta::new(1)"), [module("alpha/Beta/new")]);
        assert_eq!(paths("{alpha::B, gamma}"), [module("alpha/B"), module("gamma")]);
    }

    #[test]
    fn a_circle_is_found_and_parents_children_comments_and_the_root_draw_no_edge() {
        let files: Files = [
            ("", "pub use alpha::A;"),
            ("alpha", "use crate::beta::B; mod inner;"),
            ("alpha/inner", "use crate::alpha::A;"),
            ("beta", "use crate::{gamma::G, Root};\n// use crate::delta::D;"),
            ("gamma", "fn g() -> crate::alpha::A { todo!() }"),
            ("delta", "use crate::beta::B;"),
            ("eps", "use my_crate::delta::D; macro_rules! m { () => { $crate::delta::D } }"),
        ]
        .into_iter()
        .map(|(m, t)| (module(m), (format!("{m}.rs"), t.to_owned())))
        .collect();
        assert_eq!(circles(&files), [vec![module("alpha"), module("beta"), module("gamma")]]);
    }

    #[test]
    fn a_crate_without_circles_has_none() {
        let files: Files = [("", "mod a; mod b;"), ("a", "use crate::b::B;"), ("b", "pub struct B;")]
            .into_iter()
            .map(|(m, t)| (module(m), (format!("{m}.rs"), t.to_owned())))
            .collect();
        assert!(circles(&files).is_empty());
    }
}
