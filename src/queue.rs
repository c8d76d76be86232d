//! A first-in, first-out list over a `Vec`: the few operations of
//! `VecDeque` the pacer's permit blocks use, with the same names and
//! results. A `VecDeque` brings its ring buffer's code (wrapping copies on
//! growth, making itself contiguous, draining across the wrap) into the
//! wasm module for each element type; this is a `Vec` and a count of the
//! items taken from its front, whose places hold a default value until the
//! next compaction. Taking from the front costs O(1) (amortised), as
//! before.

#[derive(Debug, Clone)]
pub struct Queue<T> {
    items: Vec<T>,
    /// `items[..taken]` were taken from the front.
    taken: usize,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue {
            items: Vec::new(),
            taken: 0,
        }
    }
}

impl<T: Default> Queue<T> {
    pub fn new() -> Self {
        Queue::default()
    }

    pub fn len(&self) -> usize {
        self.items.len() - self.taken
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn front(&self) -> Option<&T> {
        self.items.get(self.taken)
    }

    pub fn back(&self) -> Option<&T> {
        self.as_slice().last()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.as_slice().iter()
    }

    pub fn push_back(&mut self, item: T) {
        self.items.push(item);
    }

    /// Puts an item back at the front (where the last `pop_front` took
    /// it from, without moving the others).
    pub fn push_front(&mut self, item: T) {
        match self.taken.checked_sub(1) {
            Some(place) => {
                self.items[place] = item;
                self.taken = place;
            }
            None => self.items.insert(0, item),
        }
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let item = std::mem::take(self.items.get_mut(self.taken)?);
        self.taken += 1;
        // Once half the places are taken ones, the rest moves down: every
        // item moves at most once per time the list doubles.
        if self.taken * 2 >= self.items.len() {
            self.compact();
        }
        Some(item)
    }

    /// How many items from the front satisfy `before` (which holds for a
    /// prefix), as `VecDeque::partition_point`.
    pub fn partition_point(&self, before: impl FnMut(&T) -> bool) -> usize {
        self.as_slice().partition_point(before)
    }

    /// The items in order, contiguous (as `VecDeque::make_contiguous`).
    pub fn make_contiguous(&mut self) -> &mut [T] {
        &mut self.items[self.taken..]
    }

    pub fn retain_mut(&mut self, keep: impl FnMut(&mut T) -> bool) {
        self.compact();
        self.items.retain_mut(keep);
    }

    /// The items from `at` on, leaving the first `at`.
    pub fn split_off(&mut self, at: usize) -> Queue<T> {
        Queue {
            items: self.items.split_off(self.taken + at),
            taken: 0,
        }
    }

    /// Takes the first `n` items out, as `drain(..n).collect()` would.
    pub fn take_front(&mut self, n: usize) -> Vec<T> {
        let rest = self.split_off(n);
        std::mem::replace(self, rest).into()
    }

    fn as_slice(&self) -> &[T] {
        &self.items[self.taken..]
    }

    /// Drops the places taken from the front. Through `split_off`, whose
    /// code the module has for this type already, not a drain of its own.
    fn compact(&mut self) {
        if self.taken > 0 {
            self.items = self.items.split_off(self.taken);
            self.taken = 0;
        }
    }
}

/// Takes the first `n` of `items` out, as `drain(..n).collect()` would,
/// without a drain's iterator and the collect's adapters, which are in
/// the wasm once per element type.
pub fn take_front<T>(items: &mut Vec<T>, n: usize) -> Vec<T> {
    let rest = items.split_off(n);
    std::mem::replace(items, rest)
}

impl<T: Default> From<Queue<T>> for Vec<T> {
    fn from(mut queue: Queue<T>) -> Vec<T> {
        queue.compact();
        queue.items
    }
}

impl<T> FromIterator<T> for Queue<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Queue {
            items: iter.into_iter().collect(),
            taken: 0,
        }
    }
}

impl<T> Extend<T> for Queue<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        self.items.extend(iter);
    }
}

impl<T: Default> IntoIterator for Queue<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        Vec::from(self).into_iter()
    }
}

impl<'a, T: Default> IntoIterator for &'a Queue<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: PartialEq> PartialEq for Queue<T> {
    fn eq(&self, other: &Self) -> bool {
        self.items[self.taken..] == other.items[other.taken..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Applies the same operations to a Queue and a VecDeque and checks
    /// that they hold the same items after each.
    #[test]
    fn a_queue_answers_as_a_vec_deque_does_through_pops_pushes_and_drains() {
        let mut queue: Queue<u32> = (0..6).collect();
        let mut deque: VecDeque<u32> = (0..6).collect();
        let same = |q: &Queue<u32>, d: &VecDeque<u32>| {
            assert_eq!(q.iter().copied().collect::<Vec<_>>(), Vec::from(d.clone()));
            assert_eq!(
                (q.len(), q.front(), q.back()),
                (d.len(), d.front(), d.back())
            );
        };
        assert_eq!(queue.pop_front(), deque.pop_front());
        same(&queue, &deque);
        queue.push_front(9);
        deque.push_front(9);
        same(&queue, &deque);
        for _ in 0..3 {
            assert_eq!(queue.pop_front(), deque.pop_front());
            same(&queue, &deque);
        }
        queue.push_front(7);
        deque.push_front(7);
        queue.extend([10, 11, 12]);
        deque.extend([10, 11, 12]);
        same(&queue, &deque);
        assert_eq!(
            queue.partition_point(|&x| x < 10),
            deque.partition_point(|&x| x < 10)
        );
        queue.retain_mut(|x| *x % 2 == 0);
        deque.retain_mut(|x| *x % 2 == 0);
        same(&queue, &deque);
        assert_eq!(Vec::from(queue.split_off(2)), Vec::from(deque.split_off(2)));
        same(&queue, &deque);
        queue.extend([20, 21, 22, 23]);
        deque.extend([20, 21, 22, 23]);
        queue.pop_front();
        deque.pop_front();
        assert_eq!(queue.take_front(2), deque.drain(..2).collect::<Vec<_>>());
        same(&queue, &deque);
        queue.make_contiguous().reverse();
        deque.make_contiguous().reverse();
        same(&queue, &deque);
        assert_eq!(
            queue.take_front(queue.len()),
            deque.drain(..).collect::<Vec<_>>()
        );
        same(&queue, &deque);
        assert_eq!(queue.pop_front(), None);
        queue.push_front(1);
        assert_eq!(Vec::from(queue), vec![1]);
    }

    #[test]
    fn items_taken_from_the_front_are_not_kept_once_half_the_places_are_taken() {
        let mut queue: Queue<u32> = (0..8).collect();
        for _ in 0..3 {
            queue.pop_front();
        }
        assert_eq!((queue.items.len(), queue.taken), (8, 3));
        queue.pop_front();
        assert_eq!((queue.items.len(), queue.taken), (4, 0));
        assert_eq!(queue.into_iter().collect::<Vec<_>>(), vec![4, 5, 6, 7]);
    }
}
