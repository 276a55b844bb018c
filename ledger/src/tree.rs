//! The account tree in memory: parent links, walked upwards. Keyed by name (reads) or by id
//! (the posting path).

use std::collections::HashMap;
use std::hash::Hash;

/// Deeper than any real tree; a guard against a corrupt parent cycle, which the ledger never
/// writes.
const MAX_DEPTH: usize = 256;

/// Parent links of (a part of) the account tree. A subset is enough as long as it is closed
/// under "parent of".
#[derive(Debug, Clone)]
pub struct AccountTree<K: Eq + Hash> {
    parents: HashMap<K, Option<K>>,
}

impl<K: Eq + Hash> Default for AccountTree<K> {
    fn default() -> Self {
        AccountTree {
            parents: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash> AccountTree<K> {
    pub fn new() -> AccountTree<K> {
        AccountTree::default()
    }

    pub fn from_pairs(pairs: impl IntoIterator<Item = (K, Option<K>)>) -> AccountTree<K> {
        AccountTree {
            parents: pairs.into_iter().collect(),
        }
    }

    pub fn insert(&mut self, account: K, parent: Option<K>) {
        self.parents.insert(account, parent);
    }

    pub fn contains(&self, account: &K) -> bool {
        self.parents.contains_key(account)
    }

    pub fn parent(&self, account: &K) -> Option<&K> {
        self.parents.get(account).and_then(Option::as_ref)
    }

    pub fn accounts(&self) -> impl Iterator<Item = &K> {
        self.parents.keys()
    }

    /// `account`, its parent, …, up to the root (only the accounts this tree knows).
    pub fn ancestors_or_self<'t>(&'t self, account: &'t K) -> Vec<&'t K> {
        let mut chain = Vec::with_capacity(6);
        let mut current = Some(account);
        while let Some(a) = current {
            if chain.len() >= MAX_DEPTH || !self.contains(a) {
                break;
            }
            chain.push(a);
            current = self.parent(a);
        }
        chain
    }

    /// Whether `account` is `ancestor` or lies below it.
    pub fn is_in_subtree(&self, account: &K, ancestor: &K) -> bool {
        self.ancestors_or_self(account).contains(&ancestor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> AccountTree<String> {
        AccountTree::from_pairs([
            ("root".to_string(), None),
            ("org".to_string(), Some("root".to_string())),
            ("physics".to_string(), Some("org".to_string())),
        ])
    }

    #[test]
    fn walks_up_to_root() {
        let t = tree();
        let physics = "physics".to_string();
        assert_eq!(t.ancestors_or_self(&physics), ["physics", "org", "root"]);
        assert!(t.ancestors_or_self(&"unknown".to_string()).is_empty());
        assert!(t.is_in_subtree(&physics, &"org".to_string()));
        assert!(!t.is_in_subtree(&"org".to_string(), &physics));
    }
}
