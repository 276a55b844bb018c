-- bursar ledger, SQLite: the API jobs that hold nothing and still wait for their end.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- A job whose estimate is 0 (a free partition or QOS) has no hold: it is settled once its
-- cluster reports it ended. A record that ends it NODE_FAIL or PREEMPTED may be followed by a
-- rerun under the same id, so the gateway asks the cluster first; it finds those jobs among
-- the few still `held` without a hold, not by reading every API job.
create index api_jobs_free_held on api_jobs (id) where state = 'held' and hold_id is null;
