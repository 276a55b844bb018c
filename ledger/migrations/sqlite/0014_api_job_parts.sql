-- bursar ledger, SQLite: every usage record of a job that has more than one.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- A dstack run is one job to the user who submitted it, but one usage record per job
-- submission: every node of a multi-node task, every retry after a lost spot instance, a
-- failure or a wait for capacity. The job's hold settles by one of them (its `settle_ref`,
-- the run's first submission); the collector lists them all here as it charges them, so that
-- a job's charge is what all of its records cost. A record is part of one job: listed again
-- for another, it moves. Written only for jobs submitted through bursar, read by job.
create table api_job_parts (
    job_id text not null,
    submit integer not null,
    api_job_id integer not null references api_jobs (id),
    primary key (job_id, submit)
) strict, without rowid;
create index api_job_parts_by_job on api_job_parts (api_job_id);
