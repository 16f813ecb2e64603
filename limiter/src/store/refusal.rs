//! Backing off after a refusal. A server that refused this client's credentials or certificate
//! will refuse the next handshake too, until someone fixes the setting: dialing again for every
//! request would open a connection per request (and make the server log each). So after a
//! refusal the store does not dial again for a while, answering with the same refusal instead;
//! the wait starts at [`FIRST`] and doubles with each refusal in a row, up to [`LONGEST`], and a
//! successful handshake resets it. Meanwhile the breaker opens as for any outage and the failure
//! policies answer.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Error;

/// The first wait after a refusal.
pub(crate) const FIRST: Duration = Duration::from_millis(250);
/// The longest wait: a fixed setting is picked up within this.
pub(crate) const LONGEST: Duration = Duration::from_secs(16);

#[derive(Debug)]
struct Refused {
    error: Error,
    until: Instant,
    wait: Duration,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    last: Mutex<Option<Refused>>,
}

fn lock(m: &Mutex<Option<Refused>>) -> MutexGuard<'_, Option<Refused>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Backoff {
    /// The refusal to answer with instead of dialing, while backing off.
    pub(crate) fn pending(&self) -> Option<Error> {
        let last = lock(&self.last);
        last.as_ref().filter(|r| Instant::now() < r.until).map(|r| r.error.clone())
    }

    /// A handshake was refused with `error`: wait longer before the next.
    pub(crate) fn refused(&self, error: Error) {
        let mut last = lock(&self.last);
        let wait = last.as_ref().map_or(FIRST, |r| (r.wait * 2).min(LONGEST));
        *last = Some(Refused { error, until: Instant::now() + wait, wait });
    }

    /// A handshake went through.
    pub(crate) fn connected(&self) {
        *lock(&self.last) = None;
    }
}
