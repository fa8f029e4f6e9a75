//! AVERAGE: ElasticJob's `AverageAllocationJobShardingStrategy` (`AVG_ALLOCATION`).

use super::{Assignment, ItemParams, ShardExecutor, ShardingStrategy};

/// Contiguous blocks of `n / k` items in executor order, then the `n % k` highest items one each
/// to the first executors: 3 executors, 8 items → `[0,1,6] [2,3,7] [4,5]`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Average;

impl ShardingStrategy for Average {
    fn name(&self) -> &'static str {
        "AVERAGE"
    }

    fn assign(
        &self,
        executors: &[ShardExecutor],
        _job_name: &str,
        n: u32,
        _params: &ItemParams,
    ) -> Assignment {
        Assignment::from_lists(blocks(executors.len(), n))
    }
}

/// The AVERAGE lists for `k` executors in the order given; empty when `k == 0`.
pub(super) fn blocks(k: usize, n: u32) -> Vec<Vec<u32>> {
    if k == 0 {
        return Vec::new();
    }
    // More executors than items behaves like `per = 0`; k beyond u32 cannot hold items anyway.
    let k32 = u32::try_from(k).unwrap_or(u32::MAX);
    let per = n / k32;
    let rem = n % k32;
    let mut lists = Vec::with_capacity(k);
    for position in 0..k {
        // position < k and, whenever it matters (position < rem or per > 0), position < n.
        let p = u32::try_from(position).unwrap_or(u32::MAX);
        let mut list: Vec<u32> = if per == 0 {
            Vec::new()
        } else {
            (p * per..(p + 1) * per).collect()
        };
        if p < rem {
            list.push(per * k32 + p);
        }
        lists.push(list);
    }
    lists
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_follow_elasticjob() {
        assert_eq!(blocks(0, 3), Vec::<Vec<u32>>::new());
        assert_eq!(blocks(3, 8), vec![vec![0, 1, 6], vec![2, 3, 7], vec![4, 5]]);
        assert_eq!(
            blocks(5, 3),
            vec![vec![0], vec![1], vec![2], vec![], vec![]]
        );
        assert_eq!(blocks(2, 0), vec![Vec::<u32>::new(), vec![]]);
    }
}
