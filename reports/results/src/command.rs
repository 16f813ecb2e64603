//! The command a reader runs to do it again: every replay line, results file and report names
//! its command as `ratelimit-lab simulate ...` or `ratelimit-lab verify ...`, the installed
//! tool. Inside this repository the same program runs as `cargo xtask simulate`/`verify`, and
//! xtask says so through [`INVOKED_AS_ENV`], so the lines printed there are ones a developer can
//! paste in a clone.

/// The environment variable naming how the tool was invoked (`cargo xtask` when xtask runs it).
pub const INVOKED_AS_ENV: &str = "RATELIMIT_LAB_INVOKED_AS";

/// The installed tool's name, the default.
pub const TOOL: &str = "ratelimit-lab";

/// How to run the subcommand `sub` (`simulate`, `verify`, `report`): `ratelimit-lab sub`, or
/// what [`INVOKED_AS_ENV`] says instead.
pub fn command(sub: &str) -> String {
    let invoked_as = std::env::var(INVOKED_AS_ENV).ok().filter(|v| !v.trim().is_empty());
    format!("{} {sub}", invoked_as.as_deref().unwrap_or(TOOL).trim())
}
