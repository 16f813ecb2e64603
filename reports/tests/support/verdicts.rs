//! Reads verdicts back out of what a person sees: the terminal table's text and the report
//! page's HTML, each keyed by scenario, subject (with its round-trip mode, if any), policy and
//! time source.

use std::collections::BTreeMap;

/// (scenario, subject and mode, policy, time source)
pub type Key = (String, String, String, String);

/// The algorithm's name with its round-trip mode, as both views key it: `gcra`, `gcra lease`.
fn with_mode(algorithm: &str, mode: &str) -> String {
    if mode == "-" || mode == "—" || mode.is_empty() {
        algorithm.to_string()
    } else {
        format!("{algorithm} {mode}")
    }
}

/// The `bound` column of every row of the terminal tables (`results::table::render`).
pub fn terminal(text: &str) -> BTreeMap<Key, String> {
    let mut out = BTreeMap::new();
    let mut scenario: Option<String> = None;
    let mut in_rows = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("== ") {
            let name = rest.split(" (").next().expect("a scenario header names its scenario");
            scenario = Some(name.to_string());
            in_rows = false;
            continue;
        }
        if line.starts_with("subject ") {
            in_rows = true;
            continue;
        }
        if !in_rows || line.trim().is_empty() {
            continue;
        }
        // subject mode policy time requests admitted oracle w.allow w.limit rt/dec peak BOUND... recover
        let words: Vec<&str> = line.split_whitespace().collect();
        assert!(words.len() >= 13, "not a table row: {line:?}");
        let recover_words = if words.last() == Some(&"ms") { 2 } else { 1 };
        let bound = words[11..words.len() - recover_words].join(" ");
        let scenario = scenario.clone().expect("a row before any scenario header");
        let key = (scenario, with_mode(words[0], words[1]), words[2].to_string(), words[3].to_string());
        assert!(out.insert(key.clone(), bound).is_none(), "two rows for {key:?}");
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

/// The text of an HTML fragment: tags dropped, entities decoded, whitespace collapsed.
pub fn text_of(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    unescape(&out).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The contents of every `<tag ...>...</tag>` in `html`, in order (no nesting of the same tag).
pub fn elements<'a>(html: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        if !after.starts_with([' ', '>']) {
            rest = after;
            continue;
        }
        let body_start = after.find('>').expect("unterminated tag") + 1;
        let end = after.find(&close).unwrap_or_else(|| panic!("no {close}"));
        out.push(&after[body_start..end]);
        rest = &after[end + close.len()..];
    }
    out
}

/// The verdict of every row of the scenario tables on the report page: the text of the first
/// tag in the verdict cell.
pub fn page(html: &str) -> BTreeMap<Key, String> {
    let mut out = BTreeMap::new();
    for section in elements(html, "section") {
        let Some(h2) = elements(section, "h2").first().map(|h| text_of(h)) else { continue };
        let Some(scenario) = h2.strip_prefix("Scenario ") else { continue };
        for table in elements(section, "tbody") {
            for row in elements(table, "tr") {
                let cells = elements(row, "td");
                assert_eq!(cells.len(), 12, "a scenario table row has twelve cells: {row}");
                let algorithm = text_of(cells[0]);
                let algorithm = algorithm.strip_suffix(" (external)").unwrap_or(&algorithm).to_string();
                let verdict = elements(cells[10], "span").first().map(|t| text_of(t)).unwrap_or_default();
                let key = (
                    scenario.to_string(),
                    with_mode(&algorithm, &text_of(cells[1])),
                    text_of(cells[2]),
                    text_of(cells[3]),
                );
                assert!(out.insert(key.clone(), verdict).is_none(), "two rows for {key:?}");
            }
        }
    }
    out
}

/// The text of every item of the findings lists of one scenario's section, by scenario.
pub fn findings(html: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for section in elements(html, "section") {
        let Some(h2) = elements(section, "h2").first().map(|h| text_of(h)) else { continue };
        let Some(scenario) = h2.strip_prefix("Scenario ") else { continue };
        let items = elements(section, "ul").iter().flat_map(|ul| elements(ul, "li")).map(text_of).collect();
        out.insert(scenario.to_string(), items);
    }
    out
}
