-- bursar ledger, SQLite: the pending rest of a cancelled job array, kept by name, and the
-- tasks of an array that have a record of their own.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- slurmdbd may log an array's pending rest (`63_[1-3%1]`) still naming a task that started
-- just before the array was cancelled: that task ran, and ends with a record of its own. The
-- rest's display id is kept once its record ends, and every task seen with a record of its
-- own is listed (by display id, as `api_job_tasks_ended` lists them), so that
-- `array_never_ran` (0016) counts only the tasks the rest names that were never seen, counted
-- again whenever a task record of the array comes.
alter table api_jobs add column array_rest text;

create table api_job_tasks_seen (
    api_job_id integer not null references api_jobs (id),
    task text not null,
    primary key (api_job_id, task)
) strict, without rowid;
