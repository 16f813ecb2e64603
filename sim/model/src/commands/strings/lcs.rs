//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: the longest common subsequence
//! of two strings, by Redis's dynamic programme and its walk back through the table, so that
//! where several subsequences are equally long the model picks the one Redis picks, and IDX
//! lists the same ranges in the same order (from the ends of the strings backwards).

use bytes::Bytes;

use super::super::super::resp::{Reply, MAX_BULK_LEN};
use super::super::{int_arg, is, syntax_error, Ctx};
use super::Value;

/// One matched range: positions in the first and in the second string, both inclusive.
struct Match {
    a: (usize, usize),
    b: (usize, usize),
}

impl Match {
    fn len(&self) -> usize {
        self.a.1 - self.a.0 + 1
    }
}

/// Reads both keys first (a key of another type is an error of its own, not WRONGTYPE; a
/// missing key is ""), then the options.
pub(crate) fn lcs(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let mut read = |key: &[u8]| match ctx.db.keys.get(key, ctx.now_ms).map(|e| &e.value) {
        None => Some(Bytes::new()),
        Some(Value::Str(s, _)) => Some(s.clone()),
        Some(_) => None,
    };
    // Both keys are looked up (and expired if due) before either's type is checked.
    let (a, b) = (read(args[1]), read(args[2]));
    let (Some(a), Some(b)) = (a, b) else {
        return Reply::err("ERR The specified keys must contain string values");
    };
    let (mut len_only, mut idx, mut with_match_len, mut min_match_len) = (false, false, false, 0i64);
    let mut j = 3;
    while j < args.len() {
        let opt = args[j];
        if is(opt, "idx") {
            idx = true;
        } else if is(opt, "len") {
            len_only = true;
        } else if is(opt, "withmatchlen") {
            with_match_len = true;
        } else if is(opt, "minmatchlen") && j + 1 < args.len() {
            match int_arg(args[j + 1]) {
                Ok(n) => min_match_len = n.max(0),
                Err(e) => return e,
            }
            j += 1;
        } else {
            return syntax_error();
        }
        j += 1;
    }
    if len_only && idx {
        return Reply::err("ERR If you want both the length and indexes, please just use IDX.");
    }
    let cells = (a.len() as u128 + 1) * (b.len() as u128 + 1);
    if cells * 4 > MAX_BULK_LEN as u128 {
        return Reply::err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let table = Table::build(&a, &b);
    if len_only {
        return Reply::Integer(table.total() as i64);
    }
    let (subsequence, ranges) = table.walk(&a, &b);
    if !idx {
        return Reply::Bulk(Bytes::from(subsequence));
    }
    let matches = ranges
        .iter()
        .filter(|r| min_match_len == 0 || r.len() as i64 >= min_match_len)
        .map(|r| {
            let pair = |(from, to): (usize, usize)| Reply::Array(vec![int(from), int(to)]);
            let mut item = vec![pair(r.a), pair(r.b)];
            if with_match_len {
                item.push(int(r.len()));
            }
            Reply::Array(item)
        })
        .collect();
    let text = |t: &'static str| Reply::Bulk(Bytes::from_static(t.as_bytes()));
    Reply::Map(vec![(text("matches"), Reply::Array(matches)), (text("len"), int(table.total()))])
}

fn int(n: usize) -> Reply {
    Reply::Integer(n as i64)
}

/// `LCS(i, j)`: the length of the LCS of `a[..i]` and `b[..j]`.
struct Table {
    cells: Vec<u32>,
    width: usize,
    a_len: usize,
    b_len: usize,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Table {
        let width = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * width];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Table { cells, width, a_len: a.len(), b_len: b.len() }
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    fn total(&self) -> usize {
        self.at(self.a_len, self.b_len) as usize
    }

    /// Redis's walk from the ends back: the subsequence, and the contiguous ranges in the order
    /// Redis emits them (a range ends at a mismatch or at the first byte of either string).
    fn walk(&self, a: &[u8], b: &[u8]) -> (Vec<u8>, Vec<Match>) {
        let mut result = vec![0u8; self.total()];
        let mut ranges = Vec::new();
        let mut current: Option<Match> = None;
        let (mut i, mut j, mut idx) = (self.a_len, self.b_len, self.total());
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                result[idx - 1] = a[i - 1];
                match &mut current {
                    None => current = Some(Match { a: (i - 1, i - 1), b: (j - 1, j - 1) }),
                    Some(r) if r.a.0 == i && r.b.0 == j => {
                        r.a.0 -= 1;
                        r.b.0 -= 1;
                    }
                    Some(_) => emit = true,
                }
                if current.as_ref().is_some_and(|r| r.a.0 == 0 || r.b.0 == 0) {
                    emit = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = current.is_some();
            }
            if emit {
                ranges.extend(current.take());
            }
        }
        (result, ranges)
    }
}
