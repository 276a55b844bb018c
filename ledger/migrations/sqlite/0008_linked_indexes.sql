-- bursar ledger, SQLite: the indexes by cluster job id leave out the rows not yet linked to one.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- A hold placed for an API submission, and its API job, are written before the job reaches its
-- cluster, without the cluster's job id (NULL); the id arrives a moment later, in the admission
-- writer's next transaction. Indexed with the NULL, each such row cost every admission two index
-- pages written instead of one (the NULL entry on insert, then the linked entry), and the
-- admission's commit writes every page it changed to the WAL. Nothing looks a row up by a NULL
-- job id: settling, extending and reconciling holds name the job ids (`job_ref = ?`,
-- `job_ref in (…)`, which SQLite knows imply `is not null`, so these indexes still serve them).
drop index holds_active_by_job;
create index holds_active_by_job on holds (cluster_id, job_ref)
    where state = 'active' and job_ref is not null;

drop index api_jobs_by_cluster_job;
create index api_jobs_by_cluster_job on api_jobs (cluster, cluster_job_id)
    where cluster_job_id is not null;
