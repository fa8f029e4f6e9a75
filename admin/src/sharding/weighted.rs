//! WEIGHTED: items split in proportion to executor weights.

use super::{Assignment, ItemParams, ShardExecutor, ShardingStrategy};

/// Each executor's share is `n * weight / total_weight`, rounded by largest remainder (ties go to
/// the earlier executor), so every count is within one item of the exact proportion. Items are
/// laid out as AVERAGE does: contiguous blocks of the rounded-down shares in executor order, then
/// the few leftover highest items one each to the executors that won a remainder. With equal
/// weights the answer is exactly AVERAGE's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Weighted;

impl ShardingStrategy for Weighted {
    fn name(&self) -> &'static str {
        "WEIGHTED"
    }

    fn assign(
        &self,
        executors: &[ShardExecutor],
        _job_name: &str,
        n: u32,
        _params: &ItemParams,
    ) -> Assignment {
        if executors.is_empty() {
            return Assignment::default();
        }
        // A weight of 0 would make an executor invisible (or the total 0); read it as 1.
        let weights: Vec<u64> = executors
            .iter()
            .map(|e| u64::from(e.weight.max(1)))
            .collect();
        let total: u64 = weights.iter().sum();
        let n64 = u64::from(n);

        // n * weight fits in u64 (both are u32); the quotient is at most n, so it fits in u32.
        let floors: Vec<u32> = weights
            .iter()
            .map(|w| u32::try_from(n64 * w / total).unwrap_or(n))
            .collect();
        let assigned: u32 = floors.iter().sum();
        let leftover = usize::try_from(n - assigned).unwrap_or(usize::MAX);

        // Largest remainder first; the stable sort keeps earlier executors first among equals.
        let mut by_remainder: Vec<usize> = (0..executors.len()).collect();
        by_remainder.sort_by_key(|&i| std::cmp::Reverse(n64 * weights[i] % total));
        let mut extra = vec![false; executors.len()];
        for &i in by_remainder.iter().take(leftover) {
            extra[i] = true;
        }

        let mut items = Vec::with_capacity(executors.len());
        let mut next = 0u32;
        for &count in &floors {
            items.push((next..next + count).collect::<Vec<u32>>());
            next += count;
        }
        for (list, _) in items.iter_mut().zip(&extra).filter(|(_, &e)| e) {
            list.push(next);
            next += 1;
        }
        debug_assert_eq!(next, n);
        Assignment::from_lists(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weighted(weights: &[u32], n: u32) -> Vec<Vec<u32>> {
        let executors: Vec<ShardExecutor> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| ShardExecutor {
                weight: w,
                ..ShardExecutor::new(format!("e{i}"))
            })
            .collect();
        Weighted
            .assign(&executors, "job", n, &ItemParams::default())
            .per_executor()
            .to_vec()
    }

    #[test]
    fn proportional_blocks() {
        assert_eq!(
            weighted(&[2, 1, 1], 8),
            vec![vec![0, 1, 2, 3], vec![4, 5], vec![6, 7]]
        );
        // Exact shares 10/3, 20/3: floors 3 and 6, the remainder 2/3 beats 1/3.
        assert_eq!(
            weighted(&[1, 2], 10),
            vec![vec![0, 1, 2], vec![3, 4, 5, 6, 7, 8, 9]]
        );
        // Equal remainders: the earlier executor wins.
        assert_eq!(weighted(&[1, 1], 3), vec![vec![0, 2], vec![1]]);
        assert_eq!(weighted(&[], 3), Vec::<Vec<u32>>::new());
        assert_eq!(weighted(&[0, 1], 2), vec![vec![0], vec![1]]);
    }
}
