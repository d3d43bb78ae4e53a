//! A small cache whose keys are compared in full (no hash stands in for a key), with
//! least-recently-used eviction at a fixed capacity.

/// At most `capacity` entries, most recently used last.
pub(crate) struct Lru<K, V> {
    entries: Vec<(K, V)>,
    capacity: usize,
}

impl<K, V> Lru<K, V> {
    /// An empty cache of at most `capacity` (at least one) entries.
    pub fn new(capacity: usize) -> Self {
        Lru { entries: Vec::new(), capacity: capacity.max(1) }
    }

    /// The value whose key equals `probe`, now the most recently used, and `true`; else
    /// the value `make` builds (inserted, evicting the least recently used entry when the
    /// cache is full) and `false`. A failing `make` leaves the cache as it was.
    pub fn get_or_try_insert<Q: ?Sized, E>(
        &mut self,
        probe: &Q,
        make: impl FnOnce() -> Result<(K, V), E>,
    ) -> Result<(&mut V, bool), E>
    where
        K: PartialEq<Q>,
    {
        let hit = match self.entries.iter().position(|(k, _)| k == probe) {
            Some(i) => {
                // a repeated launch hits the most recent entry, which stays where it is
                if i + 1 != self.entries.len() {
                    let entry = self.entries.remove(i);
                    self.entries.push(entry);
                }
                true
            }
            None => {
                let entry = make()?;
                if self.entries.len() == self.capacity {
                    self.entries.remove(0);
                }
                self.entries.push(entry);
                false
            }
        };
        let (_, v) = self.entries.last_mut().expect("an entry was pushed above");
        Ok((v, hit))
    }

    /// The most recently used key, if any.
    pub fn newest_key(&self) -> Option<&K> {
        self.entries.last().map(|(k, _)| k)
    }

    /// Whether a key equals `probe` (the order of use stays as it is).
    pub fn contains<Q: ?Sized>(&self, probe: &Q) -> bool
    where
        K: PartialEq<Q>,
    {
        self.entries.iter().any(|(k, _)| k == probe)
    }

    /// The first value that `pred` accepts, leaving the order of use as it is.
    pub fn find_mut(&mut self, pred: impl Fn(&V) -> bool) -> Option<&mut V> {
        self.entries.iter_mut().map(|(_, v)| v).find(|v| pred(v))
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    fn get(c: &mut Lru<String, u32>, k: &str, v: u32) -> (u32, bool) {
        let (got, hit) = c.get_or_try_insert::<String, ()>(&k.to_string(), || Ok((k.to_string(), v))).unwrap();
        (*got, hit)
    }

    #[test]
    fn keys_are_compared_in_full_and_the_least_recent_is_evicted() {
        let mut c = Lru::new(2);
        assert_eq!(get(&mut c, "a", 1), (1, false));
        assert_eq!(get(&mut c, "b", 2), (2, false));
        assert_eq!(get(&mut c, "a", 9), (1, true));
        // full: "b" is the least recently used and goes
        assert_eq!(get(&mut c, "c", 3), (3, false));
        assert_eq!(get(&mut c, "a", 9), (1, true));
        assert_eq!(get(&mut c, "b", 4), (4, false));
        // a failing build inserts nothing
        assert!(c.get_or_try_insert(&"d".to_string(), || Err::<(String, u32), _>("no")).is_err());
        assert_eq!(c.entries.len(), 2);
        // a value found by what it holds, without changing the order of use
        *c.find_mut(|&v| v == 1).unwrap() = 5;
        assert!(c.find_mut(|&v| v == 9).is_none());
        assert_eq!(get(&mut c, "b", 0), (4, true));
        assert_eq!(get(&mut c, "a", 0), (5, true));
    }
}
