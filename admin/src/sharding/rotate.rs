//! ROTATE: ElasticJob's `RoundRobinByNameJobShardingStrategy` (`ROUND_ROBIN`, formerly
//! "RotateServerByName").

use super::{assign_in_order, java, Assignment, ItemParams, ShardExecutor, ShardingStrategy};

/// AVERAGE over the executor list rotated left by `Math.abs(hashCode(jobName)) % k`, so different
/// jobs start at different executors while a given job always lands in the same place.
///
/// One deliberate deviation: when the name hashes to `Integer.MIN_VALUE` (e.g.
/// `"polygenelubricants"`), Java's `Math.abs` stays negative and, unless `k` is a power of two,
/// ElasticJob throws `IndexOutOfBoundsException` on every resharding. Here the negative offset is
/// taken modulo `k` (`rem_euclid`), which equals Java's offset wherever Java does not fail. With no
/// executors ElasticJob divides by zero; here the assignment is simply empty.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rotate;

impl ShardingStrategy for Rotate {
    fn name(&self) -> &'static str {
        "ROTATE"
    }

    fn assign(
        &self,
        executors: &[ShardExecutor],
        job_name: &str,
        n: u32,
        _params: &ItemParams,
    ) -> Assignment {
        let k = executors.len();
        if k == 0 {
            return Assignment::default();
        }
        let offset = offset(java::abs(java::string_hash(job_name)), k);
        assign_in_order(&rotated(k, offset), n)
    }
}

/// `abs_hash % k` with Java's truncating `%`, brought into `0..k` when Java would have gone
/// negative (only for `Integer.MIN_VALUE`).
fn offset(abs_hash: i32, k: usize) -> usize {
    let k64 = i64::try_from(k).unwrap_or(i64::MAX);
    let rem = i64::from(abs_hash) % k64;
    usize::try_from(rem.rem_euclid(k64)).unwrap_or(0)
}

/// `R[i] = L[(i + offset) % k]`, as positions into the caller's list.
fn rotated(k: usize, offset: usize) -> Vec<usize> {
    (0..k).map(|i| (i + offset) % k).collect()
}

#[cfg(test)]
mod tests {
    use super::super::average::blocks;
    use super::*;

    #[test]
    fn offsets_match_java_where_java_succeeds() {
        assert_eq!(offset(49, 3), 1);
        assert_eq!(offset(50, 3), 2);
        assert_eq!(offset(51, 3), 0);
        // Integer.MIN_VALUE: Java gives 0 for powers of two (kept) and -2 / -3 for 3 / 5 (throws).
        assert_eq!(offset(i32::MIN, 2), 0);
        assert_eq!(offset(i32::MIN, 4), 0);
        assert_eq!(offset(i32::MIN, 3), 1);
        assert_eq!(offset(i32::MIN, 5), 2);
    }

    /// ElasticJob's SINGLE_SHARDING_BALANCE (reference §5.3) rotates by
    /// `Math.abs(hashCode + (int) nowMillis) % k`, always, then runs AVERAGE. Shardline has no
    /// clock-dependent strategy, but its vectors exercise the same rotation, so they are checked
    /// here against the rotation ROTATE uses.
    #[test]
    fn single_sharding_balance_vectors_through_the_same_rotation() {
        let hash = java::string_hash("JobName");
        // (now in ms, expected owner of item 0 among [A, B, C]) with T = 1.
        let cases: [(i64, usize); 4] = [
            (1_700_000_000_000, 0),
            (1_700_000_000_001, 2),
            (1_700_000_000_002, 1),
            (1_751_400_000_000, 2),
        ];
        for (now, owner) in cases {
            // `(int) now` keeps the low 32 bits; the int addition wraps.
            let sum = hash.wrapping_add(now as i32);
            let off = offset(java::abs(sum), 3);
            let order = rotated(3, off);
            let lists = blocks(3, 1);
            let mut per_executor = vec![Vec::new(); 3];
            for (slot, list) in lists.into_iter().enumerate() {
                per_executor[order[slot]] = list;
            }
            let mut expected = vec![Vec::new(); 3];
            expected[owner] = vec![0u32];
            assert_eq!(per_executor, expected, "now = {now}");
        }
        assert_eq!(1_700_000_000_000i64 as i32, -807_049_216);
        assert_eq!(hash.wrapping_add(1_700_000_000_000i64 as i32), -580_492_344);
        assert_eq!(1_751_400_000_000i64 as i32, -946_656_768);
    }
}
