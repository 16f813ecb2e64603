//! The denial cache's state: per key, until when (on this instance's clock) a request of at
//! least some cost is denied without asking Redis. Why that changes no decision is in the
//! module docs of [`super`].

use super::DenialCache;
use crate::table::Table;

#[derive(Debug, Clone, Copy)]
struct Entry {
    until_ms: u64,
    min_cost: u64,
}

/// See the module docs.
pub(crate) struct Denials {
    entries: Table<Entry>,
    config: DenialCache,
}

impl Denials {
    pub(crate) fn new(config: DenialCache) -> Self {
        Denials { entries: Table::new(config.max_keys), config }
    }

    /// Ms until `key` may be asked again for `cost`, if a cached denial covers it at `now_ms`.
    pub(crate) fn check(&self, key: &str, cost: u64, now_ms: u64) -> Option<u64> {
        let key = self.entries.key(key);
        let mut entries = self.entries.lock(key);
        let e = entries.get_mut(key)?;
        (cost >= e.min_cost && now_ms < e.until_ms).then(|| e.until_ms - now_ms)
    }

    /// Forgets what is cached for `key` (its state was reset).
    pub(crate) fn forget(&self, key: &str) {
        let key = self.entries.key(key);
        self.entries.lock(key).remove(key);
    }

    /// Redis denied `key` for `cost` with `retry_after_ms`, in a call sent at `sent_at_ms`.
    pub(crate) fn record(&self, key: &str, cost: u64, sent_at_ms: u64, retry_after_ms: u64) {
        // Shortened by the share this instance's clock may run slow, so the denial ends before
        // Redis's Retry-After does, on Redis's clock.
        let shave = (retry_after_ms as u128 * self.config.clock_tolerance_ppm as u128).div_ceil(1_000_000) as u64;
        let until_ms = sent_at_ms + retry_after_ms.saturating_sub(shave);
        if cost == 0 || until_ms <= sent_at_ms {
            return;
        }
        // A full cache gives up a denial not asked about lately, in O(1) amortized
        // (`crate::table`): that key then costs one round trip more, and no decision changes.
        let key = self.entries.key(key);
        self.entries.lock(key).insert(key, Entry { until_ms, min_cost: cost });
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn a_denial_covers_its_cost_and_more_until_its_retry_after_less_the_tolerance() {
        let d = Denials::new(DenialCache::default().with_clock_tolerance_ppm(100_000));
        d.record("k", 2, 1_000, 500);
        // 500 ms less 10%: until 1450 on this clock.
        assert_eq!(d.check("k", 2, 1_000), Some(450));
        assert_eq!(d.check("k", 3, 1_449), Some(1));
        assert_eq!(d.check("k", 1, 1_100), None, "a smaller cost may fit");
        assert_eq!(d.check("k", 2, 1_450), None, "Redis may admit it now");
        assert_eq!(d.check("other", 2, 1_100), None);
    }

    #[test]
    fn memory_stays_bounded_and_peeks_are_not_cached() {
        let d = Denials::new(DenialCache::default().with_max_keys(3));
        for i in 0..100 {
            d.record(&format!("k{i}"), 1, 0, 1_000);
        }
        assert!(d.entries.len() <= 3);
        d.record("peek", 0, 0, 1_000);
        assert_eq!(d.check("peek", 0, 10), None);
    }
}
