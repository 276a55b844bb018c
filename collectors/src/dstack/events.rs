//! The events feed (`/api/events/list`): which runs changed, to re-read them by id.
//!
//! `/api/runs/list` can only page by submission time, so a run submitted long ago that
//! finishes today is not "new". [`DstackClient::refresh_runs`] on the set of unfinished runs
//! covers that; the events feed is a cross-check that also catches runs the collector never
//! listed (e.g. while a cursor was lost): every run status change is an event with the run's
//! id among its targets (`"Run status changed TERMINATING -> FAILED"`).
//!
//! dstack keeps events 30 days by default and notes they "may become available with a
//! delay": re-read with an overlap ([`EventCursor::rewound`]); re-reading a run is harmless.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::client::{DstackClient, MAX_PAGE_SIZE};
use super::number::{format_time, parse_time};
use super::wire::EventWire;
use super::DstackError;

/// The last event read, in the feed's ascending order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EventCursor {
    pub recorded_at: DateTime<Utc>,
    /// `None` after [`rewound`](Self::rewound): continue strictly after `recorded_at`.
    pub event_id: Option<String>,
}

impl EventCursor {
    /// The same cursor moved back by `by`, to read late-arriving events again.
    pub fn rewound(&self, by: chrono::Duration) -> EventCursor {
        EventCursor {
            recorded_at: self.recorded_at - by,
            event_id: None,
        }
    }
}

/// Runs of the project that had events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunEvents {
    /// Distinct run ids, in order of their first event.
    pub run_ids: Vec<String>,
    pub next_cursor: Option<EventCursor>,
    /// `limit_pages` stopped the pass while the last page was full.
    pub more: bool,
}

impl DstackClient {
    /// Reads run events after `cursor` (from the oldest kept when `None`), at most
    /// `limit_pages` pages, and returns the ids of this project's runs they name.
    pub async fn run_events_since(
        &self,
        cursor: Option<EventCursor>,
        limit_pages: u32,
    ) -> Result<RunEvents, DstackError> {
        #[derive(Serialize)]
        struct ListEvents<'a> {
            include_target_types: [&'a str; 1],
            #[serde(skip_serializing_if = "Option::is_none")]
            prev_recorded_at: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            prev_id: Option<&'a str>,
            limit: u32,
            ascending: bool,
        }
        let path = "/api/events/list";
        let limit = MAX_PAGE_SIZE;
        let mut out = RunEvents {
            next_cursor: cursor,
            ..RunEvents::default()
        };
        let mut seen: HashSet<String> = HashSet::new();
        for _ in 0..limit_pages {
            let body = ListEvents {
                include_target_types: ["run"],
                prev_recorded_at: out
                    .next_cursor
                    .as_ref()
                    .map(|c| format_time(&c.recorded_at)),
                prev_id: out.next_cursor.as_ref().and_then(|c| c.event_id.as_deref()),
                limit,
                ascending: true,
            };
            let text = self.post(path, &body).await?;
            let bad = |detail: String| DstackError::BadPayload {
                url: self.url(path),
                detail,
            };
            let events: Vec<Box<RawValue>> = serde_json::from_str(&text)
                .map_err(|e| bad(format!("not a list of events: {e}")))?;
            for raw in &events {
                let event: EventWire = serde_json::from_str(raw.get())
                    .map_err(|e| bad(format!("unreadable event: {e}")))?;
                for target in &event.targets {
                    let ours = target.project_name.as_deref() == Some(self.project());
                    if target.kind == "run" && ours && seen.insert(target.id.clone()) {
                        out.run_ids.push(target.id.clone());
                    }
                }
                out.next_cursor = Some(EventCursor {
                    recorded_at: parse_time(&event.recorded_at)
                        .map_err(|e| bad(format!("event {}: {e}", event.id)))?,
                    event_id: Some(event.id),
                });
            }
            out.more = events.len() >= limit as usize;
            if !out.more {
                break;
            }
        }
        Ok(out)
    }
}
