//! Redis Cluster's key slot: CRC16 (XMODEM) of the key's hash tag, modulo 16384. Batching
//! with `per_slot` groups checks by it, since a cluster runs a script only on keys of one slot.

/// The slot of `key`: of the text between the first `{` and the next `}` when that is not
/// empty, else of the whole key (Redis's rule).
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % 16_384
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_cluster_s() {
        // The reference value of Redis's cluster specification, and CLUSTER KEYSLOT's answers.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12_182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
        assert_eq!(key_slot(b"ratelimiter:{user1000}:gcra"), key_slot(b"user1000"));
        // An empty tag is no tag: the whole key is hashed.
        assert_eq!(key_slot(b"{}x"), crc16(b"{}x") % 16_384);
    }
}
