//! Arithmetic on results shared by the charts: means, distinct values, axis headroom, and
//! time series as step lines.

use crate::schema::{RunResult, Series};
use crate::style::ordered;

pub(crate) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Distinct values, sorted.
pub(crate) fn distinct(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    v
}

pub(crate) fn same(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// An upper axis bound with some headroom, never below `floor`.
pub(crate) fn headroom(max: f64, floor: f64) -> f64 {
    let m = if max.is_finite() { max.max(floor) } else { floor };
    m * 1.12
}

pub(crate) fn has_series(x: &RunResult) -> bool {
    x.series.as_ref().is_some_and(|s| !s.admitted.is_empty() || !s.oracle_admitted.is_empty())
}

pub(crate) fn bucket_s(s: &Series) -> f64 {
    if s.bucket_ms == 0 {
        1.0
    } else {
        s.bucket_ms as f64 / 1000.0
    }
}

pub(crate) fn series_end_s(s: &Series) -> f64 {
    s.admitted.len().max(s.oracle_admitted.len()) as f64 * bucket_s(s)
}

/// A step line: each bucket's count held flat across the bucket, scaled by `scale`.
pub(crate) fn points(values: &[u64], bucket_s: f64, scale: f64) -> Vec<(f64, f64)> {
    values
        .iter()
        .map(|&v| v as f64 * scale)
        .enumerate()
        .flat_map(|(i, v)| [(i as f64 * bucket_s, v), ((i + 1) as f64 * bucket_s, v)])
        .collect()
}

pub(crate) fn fault_kinds(rows: &[&RunResult]) -> Vec<String> {
    ordered(rows.iter().flat_map(|x| x.faults.iter().map(|f| f.kind.as_str())), &[])
}
