//! Problem details (RFC 9457) for the enforcement point's refusals, as
//! `application/problem+json`. A request over quota gets the draft's `quota-exceeded` type
//! with `violated-policies`, the names of the rules that denied it. A request refused because
//! Redis cannot be asked and a fail-closed rule refuses everything until it can gets a type of
//! its own, `temporary-reduced-capacity` (with status 503): the client exceeded nothing, and
//! should come back when the limiter next tries Redis, not slow down.

use std::fmt::Write;

use crate::enforce::RulesDecision;

/// The media type.
pub const CONTENT_TYPE: &str = "application/problem+json";
/// The problem type of draft-ietf-httpapi-ratelimit-headers-11 for a request over quota.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
/// The draft's problem type for a request the server refuses because its capacity is reduced
/// for a while: here, Redis cannot be asked and a fail-closed rule admits nothing meanwhile.
pub const TEMPORARY_REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/// `text` as a JSON string, quotes included.
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A problem object with `type`, `title`, `status`, `detail` and extra members (each value
/// already JSON).
pub fn body(problem_type: &str, title: &str, status: u16, detail: &str, extra: &[(&str, String)]) -> String {
    let mut out = format!(
        "{{\"type\":{},\"title\":{},\"status\":{status},\"detail\":{}",
        json_string(problem_type),
        json_string(title),
        json_string(detail)
    );
    for (name, value) in extra {
        let _ = write!(out, ",{}:{value}", json_string(name));
    }
    out.push('}');
    out
}

/// The body of a 429: the violated policies and when to come back.
pub fn quota_exceeded(d: &RulesDecision) -> String {
    let names: Vec<String> = d.violated().map(|r| json_string(&r.rule)).collect();
    let detail = format!(
        "The request exceeds {} of its rate-limit policies; retry after {} s.",
        names.len(),
        d.retry_after_secs().max(1)
    );
    body(
        QUOTA_EXCEEDED,
        "Request cannot be satisfied as assigned quota has been exceeded",
        429,
        &detail,
        &[("violated-policies", format!("[{}]", names.join(",")))],
    )
}

/// The body of a 503 while Redis cannot be asked: the fail-closed policies refusing and when
/// the limiter next tries Redis (the earliest moment the answer can change).
pub fn reduced_capacity(d: &RulesDecision) -> String {
    let names: Vec<String> = d
        .violated()
        .filter(|r| r.decision.source == crate::decision::Source::FailClosed)
        .map(|r| json_string(&r.rule))
        .collect();
    let detail = format!(
        "The rate limiter cannot reach its shared state, and {} of the request's policies refuse every request \
         until it can; it tries again in {} s at the earliest.",
        names.len(),
        d.retry_after_secs().max(1)
    );
    body(
        TEMPORARY_REDUCED_CAPACITY,
        "Temporary reduced capacity",
        503,
        &detail,
        &[("policies", format!("[{}]", names.join(",")))],
    )
}

/// The body of a refusal by an in-flight rule: 429 when every permit is held (the rule is the
/// violated policy), 503 when Redis cannot be asked and the rule fails closed.
pub fn in_flight(rule: &str, status: u16, retry_after_secs: u64) -> String {
    let names = format!("[{}]", json_string(rule));
    if status == 503 {
        let detail = format!(
            "The rate limiter cannot reach its shared state, and the in-flight policy refuses every request until it \
             can; it tries again in {retry_after_secs} s at the earliest."
        );
        return body(TEMPORARY_REDUCED_CAPACITY, "Temporary reduced capacity", status, &detail, &[("policies", names)]);
    }
    let detail = format!(
        "The request would exceed the requests its in-flight policy lets run at once; retry after {retry_after_secs} s \
         at the latest (sooner when another request ends)."
    );
    body(QUOTA_EXCEEDED, "Too many requests in flight", status, &detail, &[("violated-policies", names)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_and_members_follow_in_order() {
        let text = body("about:blank", "Bad \"key\"", 400, "a\\b\nc", &[("n", "[1]".into())]);
        assert_eq!(text, r#"{"type":"about:blank","title":"Bad \"key\"","status":400,"detail":"a\\b\u000ac","n":[1]}"#);
    }
}
