-- bursar ledger, SQLite: the API jobs that hold nothing, found by the id their usage carries.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- A job whose estimate is 0 (a free partition or QOS) has no hold to settle. It used to be
-- settled only when someone looked at it, so jobs nobody looked at stayed `held` for ever and
-- every listing by state, and every check of the jobs that may run again (0012), read them
-- all. Now the posting of the final record that ends such a job settles it in the same
-- transaction, as it settles a hold: the job is found by its cluster and the id its usage
-- is charged under (`settle_ref`, else the cluster's job id), as holds are by `job_ref`.
drop index api_jobs_free_held;
create index api_jobs_free_held on api_jobs (cluster, coalesce(settle_ref, cluster_job_id))
    where state = 'held' and hold_id is null and cluster_job_id is not null;
