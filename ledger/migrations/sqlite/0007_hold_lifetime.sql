-- bursar ledger, SQLite: a hold lives as long as its job is seen.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).

-- A hold's lifetime (time limit + grace, the seconds from placed_at to its first expires_at).
-- NULL until the collector first reports the hold's job unfinished (pending or running); from
-- then on every such report moves expires_at to `lifetime` after it, so that a job queued
-- longer than its time limit keeps its hold until its final record settles it.
alter table holds add column lifetime integer check (lifetime is null or lifetime > 0);
