//! A subject file for an in-flight limit (`[promise] kind = "concurrency"`): its KEYS and ARGV
//! acquire a slot, its `[release]` table gives one back, and its promise names N and the lease.
//!
//! ```toml
//! name = "my semaphore"
//! script = "acquire.lua"
//! keys = ["sem:{key}"]
//! argv = ["{limit}", "{lease_ms}", "{request_id}"]  # {request_id}: the holder's own token
//!
//! [release]                     # how the holder gives its slot back
//! script = "release.lua"        # optional: the same script when omitted
//! keys = ["sem:{key}"]
//! argv = ["{request_id}"]       # the acquire's {request_id}, and its {instance}
//!
//! [reply]                       # the acquire's reply: whether the slot is held
//! allowed = { at = 1, equals = 1 }
//!
//! [promise]
//! kind = "concurrency"
//! limit = 4                     # N: at most N held at once
//! lease_ms = 400                # a dead holder's slot comes back within this
//! ```
//!
//! The placeholders mean what they mean for a rate limit where they have a meaning here: `{key}`,
//! `{limit}` (N), `{lease_ms}`, `{now_ms}`, `{now_us}`, `{now_s}`, `{now_s_frac}`,
//! `{request_id}` (unique per acquire, and the same in its release: the holder's token) and
//! `{instance}`. The others (a period, a rate, a window, a cost) have none, and are refused.

use std::time::Duration;

use serde::Deserialize;

use redis_ratelimit::Quota;

use super::file::{At, FileError, PromiseTable};
use super::template::{Placeholder, Template, Values};

/// The largest lease a file may declare: a day.
const MAX_LEASE_MS: u64 = 86_400_000;

/// A file's `[release]` table, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReleaseTable {
    /// The release's script, beside the file (default: the acquire's).
    pub script: Option<String>,
    /// KEYS of the release.
    pub keys: Vec<String>,
    /// ARGV of the release.
    pub argv: Vec<String>,
}

/// What a concurrency subject file adds: its promise, and how a slot is released.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlightCall {
    /// N: at most this many held at once.
    pub limit: u64,
    /// How long a dead holder's slot may stay taken (ms).
    pub lease_ms: u64,
    /// The release's script.
    pub release_source: String,
    /// KEYS of the release.
    pub release_keys: Vec<Template>,
    /// ARGV of the release.
    pub release_argv: Vec<Template>,
}

/// The placeholders an in-flight limit's calls may use.
const MEANINGFUL: [Placeholder; 9] = [
    Placeholder::Key,
    Placeholder::Limit,
    Placeholder::LeaseMs,
    Placeholder::NowMs,
    Placeholder::NowUs,
    Placeholder::NowS,
    Placeholder::NowSFrac,
    Placeholder::RequestId,
    Placeholder::Instance,
];

impl InFlightCall {
    /// Validates a concurrency file's parts: `promise` names N and the lease, `release` is
    /// required, the acquire's `keys` and `argv` use only meaningful placeholders, and nothing
    /// of a rate limit's (`setup`, `[quota]`) is given.
    pub(super) fn validate(
        promise: &PromiseTable,
        release: Option<ReleaseTable>,
        acquire: (&[Template], &[Template], &str),
        rate_parts: (bool, bool),
        read_script: &mut dyn FnMut(&str) -> Result<String, String>,
        at: &At<'_>,
    ) -> Result<InFlightCall, FileError> {
        let (has_setup, has_quota) = rate_parts;
        if has_setup {
            return Err(at("setup", "is not supported for kind = \"concurrency\"".into()));
        }
        if has_quota {
            return Err(at(
                "quota",
                "an in-flight limit has no quota: its N and lease are `[promise] limit` and `lease_ms`".into(),
            ));
        }
        let limit = match promise.limit {
            Some(n) if (1..=1_000_000).contains(&n) => n,
            Some(n) => return Err(at("promise.limit", format!("must be from 1 to 1000000 slots, got {n}"))),
            None => return Err(at("promise.limit", "is required for kind = \"concurrency\": N, the slots".into())),
        };
        let lease_ms = match promise.lease_ms {
            Some(ms) if (1..=MAX_LEASE_MS).contains(&ms) => ms,
            Some(ms) => return Err(at("promise.lease_ms", format!("must be from 1 ms to a day, got {ms}"))),
            None => {
                return Err(at(
                    "promise.lease_ms",
                    "is required for kind = \"concurrency\": how long a dead holder's slot may stay taken".into(),
                ))
            }
        };
        if promise.windows.is_some() || promise.resolution_ms.is_some() || promise.counts.is_some() {
            return Err(at(
                "promise",
                "windows, resolution_ms and counts are a rate limit's, not an in-flight one's".into(),
            ));
        }
        let Some(release) = release else {
            return Err(at(
                "release",
                "is required for kind = \"concurrency\": how a holder gives its slot back".into(),
            ));
        };
        let templates = |field: &str, list: &[String]| -> Result<Vec<Template>, FileError> {
            list.iter()
                .enumerate()
                .map(|(i, s)| Template::parse(s).map_err(|m| at(&format!("{field}[{i}]"), format!("{s:?}: {m}"))))
                .collect()
        };
        let release_keys = templates("release.keys", &release.keys)?;
        let release_argv = templates("release.argv", &release.argv)?;
        let calls = [
            ("keys", acquire.0),
            ("argv", acquire.1),
            ("release.keys", &release_keys),
            ("release.argv", &release_argv),
        ];
        for (field, list) in calls {
            for (i, t) in list.iter().enumerate() {
                if let Some(p) = t.placeholders().find(|p| !MEANINGFUL.contains(p)) {
                    return Err(at(
                        &format!("{field}[{i}]"),
                        format!("`{{{p}}}` has no meaning for an in-flight limit, which has no period, rate or cost"),
                    ));
                }
            }
        }
        let release_source = match &release.script {
            Some(script) => read_script(script).map_err(|m| at("release.script", m))?,
            None => acquire.2.to_owned(),
        };
        Ok(InFlightCall { limit, lease_ms, release_source, release_keys, release_argv })
    }

    /// The quota the placeholders render from: N slots (`{limit}`); its period is the lease.
    pub fn quota(&self) -> Quota {
        Quota::new(self.limit, Duration::from_millis(self.lease_ms))
    }

    /// KEYS and ARGV of one release.
    pub fn render_release(&self, v: &Values<'_>) -> (Vec<String>, Vec<String>) {
        (
            self.release_keys.iter().map(|t| t.render(v)).collect(),
            self.release_argv.iter().map(|t| t.render(v)).collect(),
        )
    }
}

/// A rate limit's file must not use what only an in-flight limit's may.
pub(super) fn refuse_in_flight_parts(
    promise: &PromiseTable,
    release: bool,
    calls: &[(&str, &[Template])],
    at: &At<'_>,
) -> Result<(), FileError> {
    let only = |field: &str| at(field, format!("applies to kind = \"concurrency\" only, not {:?}", promise.kind));
    if release {
        return Err(only("release"));
    }
    for (field, list) in calls {
        if let Some(i) = list.iter().position(|t| t.placeholders().any(|p| p == Placeholder::LeaseMs)) {
            return Err(only(&format!("{field}[{i}]: {{lease_ms}}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::file::SubjectFile;
    use super::*;

    const SEMAPHORE: &str = r#"
name = "my semaphore"
script = "acquire.lua"
keys = ["sem:{key}"]
argv = ["{limit}", "{lease_ms}", "{request_id}"]

[release]
script = "release.lua"
keys = ["sem:{key}"]
argv = ["{request_id}"]

[reply]
allowed = { at = 1, equals = 1 }

[promise]
kind = "concurrency"
limit = 4
lease_ms = 400
"#;

    fn parse(text: &str) -> Result<SubjectFile, FileError> {
        SubjectFile::parse(Path::new("subjects/s.toml"), text, |script| match script {
            "acquire.lua" => Ok("return 1".into()),
            "release.lua" => Ok("return 0".into()),
            other => Err(format!("cannot read the script subjects/{other}: No such file")),
        })
    }

    #[test]
    fn a_concurrency_file_names_its_release_and_its_promise() {
        let f = parse(SEMAPHORE).expect("valid");
        let call = f.in_flight.as_ref().expect("an in-flight limit");
        assert_eq!((call.limit, call.lease_ms), (4, 400));
        assert_eq!((f.source.as_str(), call.release_source.as_str()), ("return 1", "return 0"));
        let quota = call.quota();
        let v = Values { key: "k", quota: &quota, now_us: 0, cost: 1, request_id: 7, instance: 0, lease_ms: 400 };
        assert_eq!(f.render(&v).1, ["4", "400", "7"]);
        assert_eq!(call.render_release(&v), (vec!["sem:k".to_owned()], vec!["7".to_owned()]));
        // Without its own script, the release runs the acquire's.
        let same = parse(&SEMAPHORE.replace("script = \"release.lua\"\n", "")).expect("valid");
        assert_eq!(same.in_flight.expect("in flight").release_source, "return 1");
    }

    #[test]
    fn every_mistake_of_a_concurrency_file_names_the_field() {
        let bucket_parts = "[promise]\nkind = \"gcra\"\n";
        let cases = [
            (SEMAPHORE.replace("lease_ms = 400\n", ""), "`promise.lease_ms`", "is required"),
            (SEMAPHORE.replace("limit = 4\n", "limit = 0\n"), "`promise.limit`", "got 0"),
            (SEMAPHORE.replace("[release]", "[unused]"), "s.toml", "unused"),
            (SEMAPHORE.replace("\"{lease_ms}\"", "\"{period_ms}\""), "`argv[1]`", "`{period_ms}` has no meaning"),
            (SEMAPHORE.replace("argv = [\"{request_id}\"]", "argv = [\"{cost}\"]"), "`release.argv[0]`", "no meaning"),
            (SEMAPHORE.replace("release.lua", "gone.lua"), "`release.script`", "cannot read"),
            (format!("{SEMAPHORE}\n[quota]\nlimit = 4\nperiod_ms = 1000\n"), "`quota`", "has no quota"),
            (SEMAPHORE.replace("lease_ms = 400", "lease_ms = 400\ncounts = \"requests\""), "`promise`", "rate limit's"),
            // A rate limit's file may use none of it.
            (SEMAPHORE.replace("[promise]\nkind = \"concurrency\"", "[promise]\nkind = \"gcra\""), "`release`", "only"),
            (
                SEMAPHORE.split("[release]").next().unwrap().to_owned()
                    + "[reply]\nallowed = { at = 1, equals = 1 }\n"
                    + bucket_parts,
                "`argv[1]: {lease_ms}`",
                "concurrency\" only",
            ),
            (
                SEMAPHORE.split("[release]").next().unwrap().replace("\"{lease_ms}\", ", "")
                    + "[reply]\nallowed = { at = 1, equals = 1 }\n"
                    + bucket_parts
                    + "lease_ms = 400\n",
                "`promise.lease_ms`",
                "concurrency\" only",
            ),
        ];
        for (text, field, detail) in cases {
            let e = parse(&text).expect_err(field).to_string();
            assert!(e.starts_with("subjects/s.toml"), "{e}");
            assert!(e.contains(field) && e.contains(detail), "expected {field} and {detail:?} in: {e}");
        }
    }
}
