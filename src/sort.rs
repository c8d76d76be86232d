//! The crate's sorting. Core's sorts are several kilobytes of wasm for each
//! element type and comparison they are used with; the crate sorts a few
//! short lists (a pool's idle leases, a block's slots, the snapshot's ids),
//! so one heapsort over plain keys serves them all.

use crate::time::Millis;

/// Sorts `v` ascending by `less` in O(n log n) without allocating. Not
/// stable: equal elements may change order.
pub(crate) fn heap_sort_by<T>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let n = v.len();
    for start in (0..n / 2).rev() {
        sift_down(v, start, n, &less);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift_down(v, 0, end, &less);
    }
}

fn sift_down<T>(v: &mut [T], mut root: usize, end: usize, less: &impl Fn(&T, &T) -> bool) {
    loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && less(&v[child], &v[child + 1]) {
            child += 1;
        }
        if !less(&v[root], &v[child]) {
            return;
        }
        v.swap(root, child);
        root = child;
    }
}

/// Sorts `v` by a time key, keeping equal keys in the order they were in.
pub(crate) fn sort_by_time<T>(v: &mut [T], key: impl Fn(&T) -> Millis) {
    // A block's refill lands after the permits it already holds: nearly
    // every call finds its list in order, and a heapsort would still move
    // every element twice.
    if v.windows(2).all(|w| key(&w[0]) <= key(&w[1])) {
        return;
    }
    let mut order = Vec::with_capacity(v.len());
    for (i, item) in v.iter().enumerate() {
        order.push((key(item), i));
    }
    heap_sort_by(&mut order, |a, b| a < b);
    // Position `i` takes the element now at `order[i].1`: follow each cycle
    // of that permutation once, marking the positions it filled.
    for start in 0..order.len() {
        let mut at = start;
        loop {
            let from = std::mem::replace(&mut order[at].1, usize::MAX);
            if from == usize::MAX || from == start {
                break;
            }
            v.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_sort_by_orders_every_permutation_of_a_short_list() {
        let mut seed = 7u64;
        for len in 0..40 {
            let mut v: Vec<u64> = (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 33) % 10
                })
                .collect();
            let mut expected = v.clone();
            expected.sort();
            heap_sort_by(&mut v, |a, b| a < b);
            assert_eq!(v, expected);
        }
    }

    #[test]
    fn sort_by_time_keeps_equal_keys_in_their_order() {
        let mut seed = 11u64;
        for len in 0..60 {
            let mut v: Vec<(Millis, usize)> = (0..len)
                .map(|i| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((seed >> 33) % 5, i)
                })
                .collect();
            let mut expected = v.clone();
            expected.sort_by_key(|e| e.0);
            sort_by_time(&mut v, |e| e.0);
            assert_eq!(v, expected);
        }
    }
}
