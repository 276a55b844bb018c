-- bursar ledger, SQLite: the tasks of a job array that will never run.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- An array cancelled on its cluster (`scancel` of its id) ends its pending rest in one record
-- (`63_[5-9%2]`, or `63_[0x3E0]` from slurmrestd 22.05) under the array's id: the tasks it
-- names never start and never have a record of their own to end them. Their count is kept
-- here from that record, so that their shares of the hold are released at once and the tasks
-- that did run settle the job when they end (0015), without waiting for its hold to expire.
alter table api_jobs add column array_never_ran integer not null default 0
    check (array_never_ran >= 0);
