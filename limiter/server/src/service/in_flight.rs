//! The in-flight side of a call: permits taken in order before any charge, given back when the
//! request is refused, and released by the tickets a proxy sends when a stream ends.

use super::{Held, Rules, Service, Slot, PERMITS};
use crate::adapter::DecideError;

impl Service {
    /// Asks for the permits of the in-flight slots, in order, each answer at its slot's
    /// index, and whether an enforced one refused. Once one refuses (or the request is `doomed`
    /// already) the rest are only looked at.
    pub(super) async fn permits(
        &self,
        rules: &Rules,
        slots: &[Slot<'_>],
        doomed: bool,
    ) -> Result<(Vec<Option<Held>>, bool), DecideError> {
        let mut held: Vec<Option<Held>> = vec![None; slots.len()];
        let mut refused = doomed;
        let mut enforced_refusal = false;
        for (i, slot) in slots.iter().enumerate() {
            let Slot::InFlight { rule, shadow, entries, peek } = slot else { continue };
            if refused || *peek {
                // Only a reading for the status: one Redis cannot give leaves the status bare.
                held[i] = self.engine.peek(rule, entries).await.ok().map(|answer| Held { answer, ticket: None });
                continue;
            }
            let h = match self.engine.acquire(rule, entries).await {
                Ok(h) => h,
                Err(e) => {
                    self.give_back(rules, &held).await;
                    return Err(e);
                }
            };
            if !h.answer.allowed && !shadow {
                refused = true;
                enforced_refusal = true;
            }
            held[i] = Some(h);
        }
        Ok((held, enforced_refusal))
    }

    /// Releases every permit `held` holds (a request refused, or a call that failed after
    /// taking them). A release that cannot reach Redis leaves the permit to its lease.
    pub(super) async fn give_back(&self, rules: &Rules, held: &[Option<Held>]) {
        let tickets = held.iter().flatten().filter_map(|h| h.ticket.as_deref());
        futures::future::join_all(tickets.map(|t| self.engine.release(rules, t))).await;
    }

    /// Releases the permits of a `ratelimit.permits` value: tickets separated by spaces. Each
    /// is tried whatever another's fate; the first failure is the answer (a permit not
    /// released is reclaimed by its lease).
    pub(super) async fn release(&self, rules: &Rules, domain: &str, value: &str) -> Result<(), DecideError> {
        let tickets: Vec<&str> = value.split(' ').filter(|t| !t.is_empty()).collect();
        if tickets.len() > self.options.max_descriptors {
            return Err(DecideError::InvalidKey(format!(
                "{PERMITS} holds {} tickets, above the bound of {} (--max-descriptors)",
                tickets.len(),
                self.options.max_descriptors
            )));
        }
        let released = futures::future::join_all(tickets.iter().map(|t| self.engine.release(rules, t))).await;
        for held in released.iter().flatten() {
            crate::metrics::permit_released(domain, *held);
        }
        released.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }
}

/// The `dynamic_metadata` of an admitted request holding permits: `ratelimit.permits`, the
/// tickets the proxy sends back when the request's stream ends.
pub(super) fn permits_metadata(tickets: &str) -> envoy_types::pb::google::protobuf::Struct {
    use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value};
    let value = Value { kind: Some(Kind::StringValue(tickets.to_owned())) };
    Struct { fields: [(PERMITS.to_owned(), value)].into_iter().collect() }
}
