//! Reloading the rules without a restart (feature `config`): an explicit
//! [`Enforcer::reload_from_file`], and [`Enforcer::watch`], a task that polls the file and
//! reloads when its contents change. A bad file is refused with the rule and field at fault,
//! and the rules in force stay in force.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Enforcer;
use crate::rules::{RuleError, RuleSet};

/// Why a reload left the old rules in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// The file could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        message: String,
    },
    /// The file's rules are refused.
    #[error("{path}: {error}")]
    Rules {
        /// The file.
        path: PathBuf,
        /// The rule and field at fault.
        error: RuleError,
    },
}

fn read(path: &Path) -> Result<String, ReloadError> {
    std::fs::read_to_string(path).map_err(|e| ReloadError::Read { path: path.to_owned(), message: e.to_string() })
}

fn parse(path: &Path, text: &str) -> Result<RuleSet, ReloadError> {
    RuleSet::from_toml(text).map_err(|error| ReloadError::Rules { path: path.to_owned(), error })
}

impl Enforcer {
    /// Reads `path` and puts its rules in force; on any error the rules in force stay.
    pub fn reload_from_file(&self, path: &Path) -> Result<(), ReloadError> {
        let rules = parse(path, &read(path)?)?;
        self.replace_rules(rules);
        Ok(())
    }

    /// Polls `path` every `every` (on the tokio runtime this is called from) and reloads when
    /// its contents differ from what they were when this was called (call it right after
    /// building the enforcer from the file); `report` hears each attempt's outcome. A file that stays bad is
    /// reported once, not at every poll. The task stops when the returned [`Watch`] is dropped.
    pub fn watch(
        &self,
        path: impl Into<PathBuf>,
        every: Duration,
        report: impl Fn(Result<&RuleSet, &ReloadError>) + Send + Sync + 'static,
    ) -> Watch {
        let path = path.into();
        let enforcer = self.clone();
        // What the rules in force were read from, as far as this watch knows: the file as it
        // is now, read before the task starts so no change made from here on is missed.
        let mut seen = read(&path).ok();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every.max(Duration::from_millis(1)));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let text = match read(&path) {
                    Ok(text) => text,
                    Err(e) => {
                        if seen.take().is_some() {
                            report(Err(&e));
                        }
                        continue;
                    }
                };
                if seen.as_deref() == Some(text.as_str()) {
                    continue;
                }
                match parse(&path, &text) {
                    Ok(rules) => {
                        enforcer.replace_rules(rules);
                        report(Ok(&enforcer.rules()));
                    }
                    Err(e) => report(Err(&e)),
                }
                seen = Some(text);
            }
        });
        Watch { task }
    }
}

/// A running [`Enforcer::watch`]; dropping it stops the polling.
#[derive(Debug)]
pub struct Watch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
