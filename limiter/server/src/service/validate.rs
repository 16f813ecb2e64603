//! What a request must be before anything is matched: a domain, descriptors of entries with
//! keys, every text and count within its bound, costs and per-request limits that mean
//! something. Each refusal names the field and the value.

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;

use super::{Refusal, Service};
use crate::config::Unit;

impl Service {
    pub(super) fn validate(&self, req: &RateLimitRequest) -> Result<(), Refusal> {
        let o = &self.options;
        if req.domain.is_empty() {
            return Err(Refusal::invalid("domain is empty: every request names the domain of its limits"));
        }
        if req.domain.len() > o.max_entry_bytes {
            return Err(Refusal::invalid(format!(
                "domain is {} bytes long, above the bound of {}",
                req.domain.len(),
                o.max_entry_bytes
            )));
        }
        if req.descriptors.is_empty() {
            return Err(Refusal::invalid("descriptors is empty: a request limits on at least one descriptor"));
        }
        if req.descriptors.len() > o.max_descriptors {
            return Err(Refusal::invalid(format!(
                "descriptors holds {} descriptors, above the bound of {} (--max-descriptors)",
                req.descriptors.len(),
                o.max_descriptors
            )));
        }
        for (i, d) in req.descriptors.iter().enumerate() {
            if d.entries.is_empty() {
                return Err(Refusal::invalid(format!(
                    "descriptors[{i}] has no entries: a descriptor is a list of key/value entries"
                )));
            }
            if d.entries.len() > o.max_entries {
                return Err(Refusal::invalid(format!(
                    "descriptors[{i}] has {} entries, above the bound of {} (--max-entries)",
                    d.entries.len(),
                    o.max_entries
                )));
            }
            for (j, e) in d.entries.iter().enumerate() {
                if e.key.is_empty() {
                    return Err(Refusal::invalid(format!("descriptors[{i}].entries[{j}].key is empty")));
                }
                // A release carries a ticket per permit of the request: each about as long as
                // its key, which is a descriptor's entries.
                let value_bound = if e.key == super::PERMITS {
                    o.max_entry_bytes.saturating_mul(o.max_descriptors)
                } else {
                    o.max_entry_bytes
                };
                for (what, text, bound) in [("key", &e.key, o.max_entry_bytes), ("value", &e.value, value_bound)] {
                    if text.len() > bound {
                        return Err(Refusal::invalid(format!(
                            "descriptors[{i}].entries[{j}].{what} is {} bytes long, above the bound of {bound} (--max-entry-bytes)",
                            text.len(),
                        )));
                    }
                }
            }
            if let Some(h) = &d.hits_addend {
                if h.value > o.max_hits {
                    return Err(Refusal::invalid(format!(
                        "descriptors[{i}].hits_addend is {}, above the largest cost accepted, {}",
                        h.value, o.max_hits
                    )));
                }
            }
            if let Some(l) = &d.limit {
                if Unit::from_proto(l.unit).is_none() {
                    return Err(Refusal::invalid(format!(
                        "descriptors[{i}].limit.unit is {}, which is not a unit (SECOND=1, MINUTE=2, HOUR=3, DAY=4, MONTH=5, YEAR=6, WEEK=7)",
                        l.unit
                    )));
                }
            }
        }
        if u64::from(req.hits_addend) > o.max_hits {
            return Err(Refusal::invalid(format!(
                "hits_addend is {}, above the largest cost accepted, {}",
                req.hits_addend, o.max_hits
            )));
        }
        Ok(())
    }
}
