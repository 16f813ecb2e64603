//! Costs known only after the work: a request reserves an estimate when it is admitted, and
//! is reconciled with its real cost when that is known (the tokens of a streamed response, the
//! rows a query read). The surplus goes back as a refund; the excess is charged whether it fits
//! or not, as a debt later requests wait out (`algo::debit`).
//!
//! The bound this keeps: a key owes at most one capacity, so the units charged to it
//! (estimates when admitted, excesses when reconciled) keep within the promise of a quota of
//! twice its capacity: twice the limit per window, or twice the burst at the same rate. And
//! the estimates admitted alone keep within the promise itself, so in any interval the excess
//! over it is at most what was reconciled in it: per request in flight at once, the excess
//! charged for it, which the caller caps (`max_excess`, at most one capacity). An excess
//! beyond the cap, or beyond the debt a key may carry, is not charged, and the reconciliation
//! says how much was. The property suites check the first bound on every algorithm's twin.

/// What a reconciliation did.
#[must_use = "an excess not charged in full is cost the limit did not see"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconciled {
    /// The real cost was the reservation: nothing to do.
    Exact,
    /// The real cost was less: `units` went back to the key (`given` is false when it had
    /// nothing to take, its full quota).
    Refunded {
        /// The reservation less the real cost.
        units: u64,
        /// Whether anything was given back.
        given: bool,
    },
    /// The real cost was more: `charged` of the `excess` were charged, taking the key into
    /// debt where they did not fit. The rest was over the cap on one request's excess, or
    /// over the one capacity a key may owe.
    Charged {
        /// The real cost less the reservation.
        excess: u64,
        /// The units of it charged.
        charged: u64,
    },
}

impl Reconciled {
    /// The units of an excess that were not charged (0 unless [`Reconciled::Charged`]).
    pub fn uncharged(&self) -> u64 {
        match *self {
            Reconciled::Charged { excess, charged } => excess - charged,
            Reconciled::Exact | Reconciled::Refunded { .. } => 0,
        }
    }
}
