//! A list that grows in fixed-size chunks: appending never moves what is
//! already stored, so a long connection's segment records are written once
//! (a `Vec` growing by doubling copies them again at every doubling and
//! takes fresh, zeroed pages for each copy). Small lists stay one
//! allocation: the first chunk grows like a `Vec` up to [`CHUNK`] items.
//! Written by hand: the crates that do this (segmented vectors) either
//! move items as they grow or do not index in O(1).

use std::ops::Index;

/// Items per chunk: a chunk of 40-byte segment records is 40 KiB, small
/// enough for the allocator's pools and large enough that the chunk list
/// itself is short (a connection of a million segments has 1,024 chunks).
pub const CHUNK: usize = 1024;

/// An append-only list stored in chunks of [`CHUNK`] items (all full but
/// the last).
#[derive(Clone)]
pub struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Chunked<T> {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    pub fn new() -> Chunked<T> {
        Chunked::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends an item; nothing stored before moves.
    pub fn push(&mut self, item: T) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => last.push(item),
            _ => {
                let mut chunk = if self.chunks.is_empty() {
                    Vec::new()
                } else {
                    Vec::with_capacity(CHUNK)
                };
                chunk.push(item);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    pub fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index / CHUNK)?.get(index % CHUNK)
    }

    pub fn first(&self) -> Option<&T> {
        self.get(0)
    }

    pub fn last(&self) -> Option<&T> {
        self.chunks.last()?.last()
    }

    /// The items in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + Clone + '_ {
        self.chunks.iter().flatten()
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        match self.get(index) {
            Some(item) => item,
            None => panic!("index {index} out of range for a list of {}", self.len),
        }
    }
}

impl<'a, T> IntoIterator for &'a Chunked<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

impl<T> FromIterator<T> for Chunked<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Chunked<T> {
        let mut list = Chunked::new();
        for item in items {
            list.push(item);
        }
        list
    }
}

impl<T: PartialEq> PartialEq for Chunked<T> {
    fn eq(&self, other: &Chunked<T>) -> bool {
        // Chunk boundaries are a function of the length alone.
        self.len == other.len && self.chunks == other.chunks
    }
}

impl<T: Eq> Eq for Chunked<T> {}

impl<T: std::fmt::Debug> std::fmt::Debug for Chunked<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_lists_index_and_iterate_like_vectors() {
        for n in [0, 1, 2, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17] {
            let expected: Vec<u64> = (0..n as u64).map(|i| i * 7 + 3).collect();
            let list: Chunked<u64> = expected.iter().copied().collect();
            assert_eq!(list.len(), n);
            assert_eq!(list.is_empty(), n == 0);
            assert!(list.iter().copied().eq(expected.iter().copied()));
            assert!(list
                .iter()
                .rev()
                .copied()
                .eq(expected.iter().rev().copied()));
            assert!((&list).into_iter().copied().eq(expected.iter().copied()));
            for (i, value) in expected.iter().enumerate() {
                assert_eq!(list[i], *value);
                assert_eq!(list.get(i), Some(value));
            }
            assert_eq!(list.get(n), None);
            assert_eq!(list.first(), expected.first());
            assert_eq!(list.last(), expected.last());
            assert_eq!(format!("{list:?}"), format!("{expected:?}"));
            let same: Chunked<u64> = expected.iter().copied().collect();
            assert_eq!(list, same);
            let longer: Chunked<u64> = expected.iter().copied().chain([1]).collect();
            assert_ne!(list, longer);
        }
    }

    #[test]
    fn full_chunks_are_never_reallocated() {
        let mut list = Chunked::new();
        for i in 0..CHUNK {
            list.push(i);
        }
        let first_chunk = list.chunks[0].as_ptr();
        for i in CHUNK..4 * CHUNK {
            list.push(i);
        }
        assert_eq!(list.chunks[0].as_ptr(), first_chunk);
        assert!(list.chunks[1..].iter().all(|c| c.capacity() == CHUNK));
    }
}
