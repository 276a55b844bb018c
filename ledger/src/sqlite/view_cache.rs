//! The quote view's cache.
//!
//! A quote reads the same few rows (the account, its chain, the chain's allocations) for
//! every request of a user; between two writes they cannot differ. Entries are tagged with a
//! generation: every write transaction of this storage bumps it after its commit, and the
//! admission writer's `PRAGMA data_version` — which changes whenever any *other* connection,
//! in this process or another, committed, and not for the admissions themselves — is looked
//! at by every quote that finds no other quote looking at it (those go on with what is known)
//! and bumps it too. An entry is served only while its generation is
//! current and only for the same second (allocations start and end on whole seconds).
//!
//! A second tag, the *structure* generation, is bumped by every write of this storage but the
//! admission path's own (holds placed with their jobs, forwarded jobs recorded): admission
//! may read an entry that predates those — they only lower what remains, and admission
//! decides on the data itself and re-reads before refusing — but nothing older, and never
//! from another second.
//!
//! So a write through this storage is seen by the next quote, and a write by another process
//! (`bursar alloc set` beside `bursar serve`) by the first quote that looks after it. Decisions never
//! read the cache: admission decides inside its write transaction.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use rustc_hash::FxHashMap;

use super::admitter::Admitter;
use crate::error::Result;
use crate::model::AdmissionView;

/// Most entries kept; the cache starts over beyond.
const MAX_ENTRIES: usize = 4096;

type Key = (String, Option<String>, i64);

#[derive(Debug)]
pub(super) struct ViewCache {
    generation: AtomicU64,
    structure: AtomicU64,
    /// `(generation, structure, view)`.
    entries: Mutex<FxHashMap<Key, (u64, u64, AdmissionView)>>,
    /// What `data_version` said last.
    last: Mutex<Option<i64>>,
    checking: AtomicBool,
}

impl ViewCache {
    pub(super) fn new() -> ViewCache {
        ViewCache {
            generation: AtomicU64::new(0),
            structure: AtomicU64::new(0),
            entries: Mutex::new(FxHashMap::default()),
            last: Mutex::new(None),
            checking: AtomicBool::new(false),
        }
    }

    /// Every cached view is stale from now on.
    pub(super) fn changed(&self) {
        self.structure.fetch_add(1, Ordering::AcqRel);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Holds were placed or jobs recorded by the admission path: stale for quotes, still
    /// good enough for admission.
    pub(super) fn holds_changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The current structure generation.
    pub(super) fn structure(&self) -> u64 {
        self.structure.load(Ordering::Acquire)
    }

    /// The current generation; unless `fresh`, first asks `watch`'s `data_version` whether
    /// another connection committed (one caller at a time asks; the others go on with what is
    /// known). No `watch`: no other connection can reach the database.
    pub(super) async fn generation(&self, fresh: bool, watch: Option<&Admitter>) -> Result<u64> {
        if !fresh {
            if let Some(watch) = watch {
                if !self.checking.swap(true, Ordering::AcqRel) {
                    let version = watch.data_version().await;
                    self.checking.store(false, Ordering::Release);
                    let version = version?;
                    let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
                    if *last != Some(version) {
                        self.changed();
                    }
                    *last = Some(version);
                }
            }
        }
        Ok(self.generation.load(Ordering::Acquire))
    }

    /// The entry for `(user, account, at)` if it is of `generation` — or, with `structure`,
    /// of that structure generation.
    pub(super) fn get(
        &self,
        generation: u64,
        structure: Option<u64>,
        user: &str,
        account: Option<&str>,
        at: i64,
    ) -> Option<AdmissionView> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (user.to_string(), account.map(str::to_string), at);
        match entries.get(&key) {
            Some((g, s, view)) if *g == generation || structure == Some(*s) => Some(view.clone()),
            _ => None,
        }
    }

    /// Keeps `view`, read at `generation` and `structure`, unless a write came in meanwhile.
    pub(super) fn put(
        &self,
        (generation, structure): (u64, u64),
        user: &str,
        account: Option<&str>,
        at: i64,
        view: &AdmissionView,
    ) {
        if self.generation.load(Ordering::Acquire) != generation
            || self.structure.load(Ordering::Acquire) != structure
        {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            (user.to_string(), account.map(str::to_string), at),
            (generation, structure, view.clone()),
        );
    }
}
