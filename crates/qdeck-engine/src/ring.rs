//! A fixed-capacity ring buffer: history per queue with memory known in advance.

#[derive(Debug, Clone)]
pub struct Ring<T> {
    buf: Vec<T>,
    cap: usize,
    /// Index of the oldest element once the buffer is full.
    head: usize,
}

impl<T: Copy> Ring<T> {
    pub fn new(cap: usize) -> Self {
        Ring {
            buf: Vec::new(),
            cap: cap.max(1),
            head: 0,
        }
    }

    pub fn push(&mut self, v: T) {
        if self.buf.len() < self.cap {
            if self.buf.capacity() == self.buf.len() {
                // Grow gently: queues polled rarely never pay for the full ring.
                let extra = (self.buf.len().max(8)).min(self.cap - self.buf.len());
                self.buf.reserve_exact(extra);
            }
            self.buf.push(v);
        } else {
            self.buf[self.head] = v;
            self.head = (self.head + 1) % self.cap;
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Oldest to newest.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + '_ {
        let (a, b) = self.buf.split_at(self.head);
        b.iter().chain(a.iter())
    }

    pub fn last(&self) -> Option<&T> {
        if self.buf.is_empty() {
            None
        } else if self.buf.len() < self.cap || self.head == 0 {
            self.buf.last()
        } else {
            self.buf.get(self.head - 1)
        }
    }

    /// Drop every point and give the memory back; the ring grows again from its next push.
    pub fn free(&mut self) {
        self.buf = Vec::new();
        self.head = 0;
    }

    /// Bytes allocated now.
    pub fn allocated_bytes(&self) -> usize {
        self.buf.capacity() * std::mem::size_of::<T>()
    }

    /// Bytes this ring holds at most.
    pub fn max_bytes(&self) -> usize {
        self.cap * std::mem::size_of::<T>()
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn keeps_the_newest_in_order() {
        let mut r = Ring::new(3);
        for i in 0..5 {
            r.push(i);
        }
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
        assert_eq!(r.last(), Some(&4));
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn freed_ring_holds_nothing_and_refills_in_order() {
        let mut r = Ring::new(3);
        for i in 0..5 {
            r.push(i);
        }
        r.free();
        assert_eq!((r.len(), r.allocated_bytes(), r.last()), (0, 0, None));
        r.push(7);
        r.push(8);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![7, 8]);
    }

    #[test]
    fn partial_ring_iterates_in_order() {
        let mut r = Ring::new(10);
        r.push(1);
        r.push(2);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(r.last(), Some(&2));
    }
}
