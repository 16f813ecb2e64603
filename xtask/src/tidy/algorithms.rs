//! One list of algorithms: `Algorithm::ALL` (`limiter/src/quota.rs`). Everything else either
//! iterates it, is sized by it, or matches on `Algorithm` (the compiler names each such place
//! when an algorithm is added, and the walk-through in `sim/tests/algorithms.rs` reaches the
//! places it cannot). Two shapes would stay silent, and tidy refuses them in Rust code:
//!
//! - an array of algorithms (or of what each algorithm has: its script, its command) sized by a
//!   number, `[Algorithm; 5]`, where a new algorithm is simply missing; size it by
//!   `Algorithm::ALL.len()` (the compiler then asks for the new one), derive it from
//!   `Algorithm::ALL`, or, for a sample of some algorithms, make it a slice;
//! - `matches!` over algorithms, which a new algorithm falls out of: give `Algorithm` a method
//!   with a match that names every algorithm (`is_bucket`, `is_windowed`).

/// The element types whose arrays must not be sized by hand.
const PER_ALGORITHM: &[&str] = &["Algorithm", "LuaScript", "Command", "Promise"];

/// The problems of the Rust file at `path` with text `text`.
pub(super) fn hand_sized_lists(path: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = super::code_of(line);
        // The one list itself.
        if path == "limiter/src/quota.rs" && code.contains("pub const ALL: [Algorithm; ") {
            continue;
        }
        for ty in PER_ALGORITHM {
            let needle = format!("[{ty}; ");
            let mut from = 0;
            while let Some(at) = code[from..].find(&needle) {
                let size_at = from + at + needle.len();
                from = size_at;
                if code[size_at..].starts_with(|c: char| c.is_ascii_digit()) {
                    problems.push(format!(
                        "{path}:{}: an array of {ty} sized by hand: size it by Algorithm::ALL.len() or derive it \
                         from Algorithm::ALL (a sample of some algorithms is a slice)",
                        i + 1
                    ));
                }
            }
        }
        // Spelled in two halves so this file does not match itself.
        if code.contains(&["matches", "!("].concat()) && code.contains("Algorithm::") {
            problems.push(format!(
                "{path}:{}: matches! over algorithms, which a new algorithm falls out of silently: use a method of \
                 Algorithm whose match names every algorithm",
                i + 1
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_sized_by_hand_and_partial_matches_are_refused() {
        let sized = ["const X: [Algo", "rithm; 5] = ALL;"].concat();
        assert_eq!(hand_sized_lists("x.rs", &sized).len(), 1);
        let by_all = ["const X: [Lua", "Script; Algorithm::ALL.len()] = ALL;"].concat();
        assert!(hand_sized_lists("x.rs", &by_all).is_empty());
        let partial = ["let w = matc", "hes!(a, Algorithm::FixedWindow | Algorithm::SlidingWindow);"].concat();
        assert_eq!(hand_sized_lists("x.rs", &partial).len(), 1);
        let commented = ["// [Algo", "rithm; 5]"].concat();
        assert!(hand_sized_lists("x.rs", &commented).is_empty());
        assert!(hand_sized_lists("x.rs", "const SAMPLE: &[Algorithm] = &[Algorithm::Gcra];").is_empty());
    }
}
