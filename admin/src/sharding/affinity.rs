//! AFFINITY: items go to the executors whose labels match the item's parameter.

use std::collections::BTreeMap;

use super::average::blocks;
use super::{Assignment, ItemParams, ShardExecutor, ShardingStrategy};

/// An item whose parameter equals a label of one or more online executors (say `2=shanghai` and
/// executors labelled `shanghai`) runs on one of them: the items sharing a parameter are spread
/// over the matching executors as AVERAGE spreads items over executors, in address order. Items
/// without a parameter, with an empty one, or whose labelled executors are all offline are spread
/// by AVERAGE over all online executors. With no parameters this is exactly AVERAGE.
#[derive(Debug, Clone, Copy, Default)]
pub struct Affinity;

impl ShardingStrategy for Affinity {
    fn name(&self) -> &'static str {
        "AFFINITY"
    }

    fn assign(
        &self,
        executors: &[ShardExecutor],
        _job_name: &str,
        n: u32,
        params: &ItemParams,
    ) -> Assignment {
        if executors.is_empty() {
            return Assignment::default();
        }
        let mut items = vec![Vec::new(); executors.len()];

        // Items by label, in label order so the result never depends on hash-map iteration.
        let mut labelled: BTreeMap<&str, (Vec<usize>, Vec<u32>)> = BTreeMap::new();
        let mut unmatched = Vec::new();
        for item in 0..n {
            let label = params.get(item).unwrap_or("");
            if label.is_empty() {
                unmatched.push(item);
                continue;
            }
            let group = labelled.entry(label).or_insert_with(|| {
                let matching = executors
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.labels.iter().any(|l| l == label))
                    .map(|(i, _)| i)
                    .collect();
                (matching, Vec::new())
            });
            if group.0.is_empty() {
                unmatched.push(item);
            } else {
                group.1.push(item);
            }
        }

        for (matching, group_items) in labelled.values() {
            spread(group_items, matching, &mut items);
        }
        let everyone: Vec<usize> = (0..executors.len()).collect();
        spread(&unmatched, &everyone, &mut items);
        Assignment::from_lists(items)
    }
}

/// AVERAGE of `group_items` (taken as items `0..len` of a smaller job) over the executors at
/// `positions`.
fn spread(group_items: &[u32], positions: &[usize], items: &mut [Vec<u32>]) {
    let len = u32::try_from(group_items.len()).unwrap_or(u32::MAX);
    for (slot, list) in blocks(positions.len(), len).into_iter().enumerate() {
        items[positions[slot]].extend(list.into_iter().map(|i| group_items[i as usize]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(address: &str, labels: &[&str]) -> ShardExecutor {
        ShardExecutor {
            labels: labels.iter().map(|l| l.to_string()).collect(),
            ..ShardExecutor::new(address)
        }
    }

    #[test]
    fn labelled_items_follow_labels_and_the_rest_is_averaged() {
        let executors = [
            labelled("a", &["beijing"]),
            labelled("b", &["shanghai"]),
            labelled("c", &["shanghai", "ssd"]),
        ];
        let params = ItemParams::parse("0=shanghai,1=beijing,2=shanghai,3=ssd,5=mars", 7).unwrap();
        let got = Affinity.assign(&executors, "job", 7, &params);
        // shanghai items 0, 2 over b, c; beijing 1 on a; ssd 3 on c;
        // unmatched 4, 5 (mars: nobody), 6 averaged over a, b, c.
        assert_eq!(got.per_executor(), &[vec![1, 4], vec![0, 5], vec![2, 3, 6]]);
    }
}
