//! ODEVITY: ElasticJob's `OdevitySortByNameJobShardingStrategy`.

use super::{assign_in_order, java, Assignment, ItemParams, ShardExecutor, ShardingStrategy};

/// AVERAGE over the executors as given when the job name's Java `hashCode()` is odd, and over
/// the reversed list when it is even (zero, negative even and `Integer.MIN_VALUE` included).
/// Single-item jobs thus spread over two executors: the first and the last.
#[derive(Debug, Clone, Copy, Default)]
pub struct Odevity;

impl ShardingStrategy for Odevity {
    fn name(&self) -> &'static str {
        "ODEVITY"
    }

    fn assign(
        &self,
        executors: &[ShardExecutor],
        job_name: &str,
        n: u32,
        _params: &ItemParams,
    ) -> Assignment {
        let k = executors.len();
        // Java: `long h = hashCode(); if (h % 2 == 0) reverse`. Parity survives the widening.
        let order: Vec<usize> = if java::string_hash(job_name) % 2 == 0 {
            (0..k).rev().collect()
        } else {
            (0..k).collect()
        };
        assign_in_order(&order, n)
    }
}
