-- bursar ledger, SQLite: job arrays submitted through the API.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- A Slurm job array is one submission (`sbatch --array`) and one API job, held at its tasks'
-- count times one task's estimate, under the array's job id; each task is a job of its own to
-- the cluster, with its own usage record (`63_4`, under a raw id of its own). The hold cannot
-- settle by one record as a single job's does: each task that ends (in a state after which
-- Slurm does not run it again) releases one task's share of it, in the transaction that posts
-- its record, and the task that ends the last of them settles the rest. The tasks that have
-- ended are listed here by their display id, so that a record posted again, or a task's
-- second record after a requeue, releases nothing twice. Every task's record is a part of the
-- job (`api_job_parts`), which gives the job's charge.
alter table api_jobs add column array_tasks integer check (array_tasks is null or array_tasks > 0);
create index api_jobs_arrays on api_jobs (cluster, cluster_job_id)
    where array_tasks is not null;
create table api_job_tasks_ended (
    api_job_id integer not null references api_jobs (id),
    task text not null,
    ended_at integer not null,
    primary key (api_job_id, task)
) strict, without rowid;
