//! XXL-JOB's consistent-hash ring (`ExecutorRouteConsistentHash`), reproduced exactly so a
//! Shardline admin and a Java admin send a job to the same executor.

use md5::{Digest, Md5};
use std::collections::BTreeMap;

/// Virtual nodes per address, as in XXL-JOB.
const VIRTUAL_NODES: u32 = 100;

/// XXL-JOB's `hash()`: MD5 of the UTF-8 key, then digest bytes 0..4 read **little-endian**
/// (`digest[3] << 24 | digest[2] << 16 | digest[1] << 8 | digest[0]`) as an unsigned 32-bit value.
pub(crate) fn hash(key: &str) -> u32 {
    let digest = Md5::digest(key.as_bytes());
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// The ring for one ordered address list: `(hash, position)` ascending by hash.
#[derive(Debug)]
pub(crate) struct Ring {
    nodes: Vec<(u32, usize)>,
}

impl Ring {
    /// Builds the ring for `addresses` in the order given. On a hash collision the later address
    /// wins, because XXL-JOB fills a `TreeMap` with `put`, which overwrites.
    pub(crate) fn new<A: AsRef<str>>(addresses: &[A]) -> Ring {
        let mut tree = BTreeMap::new();
        for (position, address) in addresses.iter().enumerate() {
            for i in 0..VIRTUAL_NODES {
                tree.insert(
                    hash(&format!("SHARD-{}-NODE-{i}", address.as_ref())),
                    position,
                );
            }
        }
        Ring {
            nodes: tree.into_iter().collect(),
        }
    }

    /// The position owning `job_id`: the first node whose hash is ≥ the hash of the job id in
    /// decimal, wrapping to the first node. `None` only for an empty ring.
    pub(crate) fn owner(&self, job_id: i64) -> Option<usize> {
        let job_hash = hash(&job_id.to_string());
        let at = self.nodes.partition_point(|&(h, _)| h < job_hash);
        self.nodes
            .get(at)
            .or_else(|| self.nodes.first())
            .map(|&(_, position)| position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values from Python, independently of this code:
    /// `int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "little")`.
    #[test]
    fn hash_reads_the_first_four_digest_bytes_little_endian() {
        // md5("1") = c4ca4238a0b923820dcc509a6f75849b -> bytes c4 ca 42 38 -> 0x3842cac4.
        assert_eq!(hash("1"), 0x3842_cac4);
        // md5("") = d41d8cd98f00b204e9800998ecf8427e -> 0xd98c1dd4.
        assert_eq!(hash(""), 0xd98c_1dd4);
    }

    #[test]
    fn empty_ring_has_no_owner() {
        let empty: [&str; 0] = [];
        assert_eq!(Ring::new(&empty).owner(1), None);
    }
}
