//! Operations on one key's state besides deciding a request: what support teams and sign-in
//! flows ask of a limiter. Neither has a failure policy that could stand in for it, so with
//! Redis unreachable each is an error and nothing happened in Redis.

use std::time::Duration;

use super::Limiter;
use crate::error::Error;
use crate::reconcile::Reconciled;

impl Limiter {
    /// Forgets `key`'s state and its block, as if the key had never been seen: a support team
    /// unblocking a customer, a login limit cleared after a successful sign-in. It is the state of the
    /// limiter's own quota (for a named limiter, the state every quota of its period shares,
    /// see [`Limiter::check_with`]); a window algorithm's windows are those within one period of
    /// this instance's clock. The denial cache and the leases drop what they hold for the key.
    /// No failure policy can stand in for a reset: when Redis cannot be asked it is an error,
    /// [`Error::Unavailable`], and nothing was reset in Redis.
    ///
    /// ```
    /// use redis_ratelimit::{Algorithm, Limiter, Quota};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let limiter = Limiter::builder(Algorithm::SlidingLog, Quota::per_minute(1)).build().unwrap();
    /// assert!(limiter.check("alice").await.unwrap().allowed);
    /// assert!(!limiter.check("alice").await.unwrap().allowed);
    /// limiter.reset("alice").await.unwrap();
    /// assert!(limiter.check("alice").await.unwrap().allowed);
    /// # });
    /// ```
    pub async fn reset(&self, key: &str) -> Result<(), Error> {
        let inner = &*self.inner;
        inner.gate.keys().check(key)?;
        if let Some(denials) = &inner.modes.denials {
            denials.forget(key);
        }
        if let Some(leases) = &inner.modes.leases {
            leases.forget(key);
        }
        inner.gate.reset(&inner.own_charge(key, 0)).await
    }

    /// Gives `units` back to `key`'s state: a request that should not have counted (a login
    /// limit that counts only failed sign-ins refunds the ones that succeed; a call the server
    /// itself failed). Never beyond the quota: a window's count stops at zero, a bucket at its
    /// burst. The newest units go first (a sliding log forgets its latest entries; a
    /// sliding-window counter takes from the current window, then the previous). A refund of
    /// more than the quota's capacity gives back the capacity. Returns whether anything was
    /// given back: `false` when the key was at its full quota already.
    ///
    /// It is the state of the limiter's own quota, on this instance's clock (or Redis's, in
    /// server time), as [`Limiter::reset`]'s. The denial cache forgets the key, since its
    /// next request may now fit; leased units stay leased. With Redis unreachable it is
    /// [`Error::Unavailable`] and nothing was given back.
    ///
    /// ```
    /// use redis_ratelimit::{Algorithm, Limiter, Quota};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let logins = Limiter::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build().unwrap();
    /// assert!(logins.check("alice").await.unwrap().allowed);
    /// // The sign-in succeeded: only failures count.
    /// assert!(logins.refund("alice", 1).await.unwrap());
    /// assert_eq!(logins.state("alice").await.unwrap().remaining, 3);
    /// assert!(!logins.refund("alice", 1).await.unwrap(), "nothing left to give back");
    /// # });
    /// ```
    pub async fn refund(&self, key: &str, units: u64) -> Result<bool, Error> {
        let inner = &*self.inner;
        inner.gate.keys().check(key)?;
        if let Some(denials) = &inner.modes.denials {
            denials.forget(key);
        }
        inner.gate.refund(&inner.own_charge(key, 0), units).await
    }

    /// Settles a request on `key` that reserved `reserved` units when it was checked (its
    /// estimated cost, [`Limiter::check_n`]) once its real cost, `actual`, is known: the tokens
    /// of a streamed response, the rows a query read. A surplus goes back as
    /// [`Limiter::refund`] gives it; an excess is charged whether it fits or not, up to
    /// [`LimiterBuilder::max_excess`](super::LimiterBuilder::max_excess) of it: what does not
    /// fit is owed, and the key's next requests wait it out as they would wait for units spent.
    /// A key owes at most one capacity. The answer says which it was and how much was charged.
    ///
    /// This is the bound on a client whose requests cost more than they reserve: in any
    /// interval, at most the quota's promise plus, per request of it in flight at once, the
    /// excess charged for it. It is the state of the limiter's own quota, on the clock it
    /// decides by, as [`Limiter::refund`]'s; leased units stay leased. With Redis unreachable it
    /// is [`Error::Unavailable`] and nothing was charged or given back.
    ///
    /// ```
    /// use redis_ratelimit::{Algorithm, Limiter, Quota, Reconciled};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// // 1,000 tokens a minute; a completion is admitted on an estimate of 300.
    /// let tokens = Limiter::builder(Algorithm::Gcra, Quota::per_minute(1_000)).build().unwrap();
    /// assert!(tokens.check_n("team-a", 300).await.unwrap().allowed);
    /// // It used 900: the other 600 are charged, and the key has 100 left.
    /// let settled = tokens.reconcile("team-a", 300, 900).await.unwrap();
    /// assert_eq!(settled, Reconciled::Charged { excess: 600, charged: 600 });
    /// assert_eq!(tokens.state("team-a").await.unwrap().remaining, 100);
    /// // Another used 1,000 of its 100: the key owes 800, and refuses until they are earned.
    /// assert!(tokens.check_n("team-a", 100).await.unwrap().allowed);
    /// let owed = tokens.reconcile("team-a", 100, 900).await.unwrap();
    /// assert_eq!(owed, Reconciled::Charged { excess: 800, charged: 800 });
    /// let refused = tokens.check("team-a").await.unwrap();
    /// assert!(!refused.allowed);
    /// assert!(refused.retry_after.as_secs() >= 48, "800 tokens at 1,000 a minute");
    /// # });
    /// ```
    pub async fn reconcile(&self, key: &str, reserved: u64, actual: u64) -> Result<Reconciled, Error> {
        let inner = &*self.inner;
        inner.gate.keys().check(key)?;
        if let (Some(denials), true) = (&inner.modes.denials, actual < reserved) {
            denials.forget(key);
        }
        inner.gate.reconcile(&inner.own_charge(key, 0), reserved, actual, inner.max_excess).await
    }

    /// Blocks `key` for `duration`: until then every request on it is refused, whatever its
    /// quota says, with nothing remaining and a Retry-After of the block's end (or later, when
    /// the quota itself would refuse the request then), and consumes nothing; then the key
    /// decides by its state again, which the block left as it was. A block replaces the key's
    /// earlier one; [`Duration::ZERO`] lifts it, and [`Limiter::reset`] forgets it with the
    /// state. A support team stops an abusive client for an hour; a sign-in flow locks an
    /// account for fifteen minutes after its limit of failures.
    ///
    /// Only a blockable limiter ([`super::LimiterBuilder::blockable`]) reads blocks: on any
    /// other this is an [`Error::Config`] naming `blockable`, and nothing was blocked. The
    /// block ends on the clock the limiter decides by (this instance's, or Redis's in server
    /// time); it applies to every quota [`Limiter::check_with`] decides the key under. With
    /// Redis unreachable it is [`Error::Unavailable`] and nothing was blocked; while Redis
    /// cannot be asked, the failure policy answers without knowing the block.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redis_ratelimit::{Algorithm, Limiter, Quota};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let logins = Limiter::builder(Algorithm::FixedWindow, Quota::per_minute(5)).blockable().build().unwrap();
    /// logins.block("mallory", Duration::from_secs(900)).await.unwrap();
    /// let refused = logins.check("mallory").await.unwrap();
    /// assert!(!refused.allowed);
    /// // Until the block ends, on this instance's clock (a millisecond may have passed).
    /// assert!((899_000..=900_000).contains(&refused.retry_after.as_millis()));
    /// logins.block("mallory", Duration::ZERO).await.unwrap();
    /// assert!(logins.check("mallory").await.unwrap().allowed);
    /// # });
    /// ```
    pub async fn block(&self, key: &str, duration: Duration) -> Result<(), Error> {
        let inner = &*self.inner;
        inner.gate.keys().check(key)?;
        let charge = inner.own_charge(key, 0);
        // A lifted block must not leave a denial cached here; a new one's come from Redis.
        if let (Some(denials), true) = (&inner.modes.denials, inner.blockable) {
            denials.forget(key);
        }
        inner.gate.block(&charge, duration).await
    }
}
