//! The quote view's cache.
//!
//! A quote reads the same few rows (the account, its chain, the chain's allocations) for
//! every request of a user; between two writes they cannot differ. Entries are tagged with a
//! generation: every write transaction of this storage bumps it after its commit, and a
//! dedicated connection's `PRAGMA data_version` — which changes whenever any *other*
//! connection, in this process or another, committed — is looked at at most every
//! [`VIEW_CACHE_RECHECK`] and bumps it too. An entry is served only while its generation is
//! current and only for the same second (allocations start and end on whole seconds).
//!
//! So a write through this storage is seen by the next quote, and a write by another process
//! (`bursar alloc set` beside `bursar serve`) within [`VIEW_CACHE_RECHECK`]. Decisions never
//! read the cache: admission decides inside its write transaction.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use rustc_hash::FxHashMap;
use sqlx::SqlitePool;

use super::db;
use crate::error::Result;
use crate::model::AdmissionView;

/// Most entries kept; the cache starts over beyond.
const MAX_ENTRIES: usize = 4096;

type Key = (String, Option<String>, i64);

#[derive(Debug)]
pub(super) struct ViewCache {
    generation: AtomicU64,
    entries: Mutex<FxHashMap<Key, (u64, AdmissionView)>>,
    /// The connection whose `data_version` tells of other connections' commits (none for an
    /// in-memory database, which no other connection can reach).
    watch: Option<SqlitePool>,
    /// What `data_version` said last.
    last: Mutex<Option<i64>>,
    checking: AtomicBool,
}

impl ViewCache {
    pub(super) fn new(watch: Option<SqlitePool>) -> ViewCache {
        ViewCache {
            generation: AtomicU64::new(0),
            entries: Mutex::new(FxHashMap::default()),
            watch,
            last: Mutex::new(None),
            checking: AtomicBool::new(false),
        }
    }

    /// Every cached view is stale from now on.
    pub(super) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The current generation; unless `fresh`, first asks `data_version` whether another
    /// connection committed (one caller at a time asks; the others go on with what is known).
    pub(super) async fn generation(&self, fresh: bool) -> Result<u64> {
        if !fresh {
            if let Some(watch) = &self.watch {
                if !self.checking.swap(true, Ordering::AcqRel) {
                    let version = sqlx::query_scalar::<_, i64>("pragma data_version")
                        .fetch_one(watch)
                        .await
                        .map_err(db);
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

    pub(super) fn get(
        &self,
        generation: u64,
        user: &str,
        account: Option<&str>,
        at: i64,
    ) -> Option<AdmissionView> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (user.to_string(), account.map(str::to_string), at);
        match entries.get(&key) {
            Some((g, view)) if *g == generation => Some(view.clone()),
            _ => None,
        }
    }

    /// Keeps `view`, read at `generation`, unless a write came in meanwhile.
    pub(super) fn put(
        &self,
        generation: u64,
        user: &str,
        account: Option<&str>,
        at: i64,
        view: &AdmissionView,
    ) {
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(
            (user.to_string(), account.map(str::to_string), at),
            (generation, view.clone()),
        );
    }
}
