-- bursar ledger, SQLite: a job's parts are records of its own cluster.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).
--
-- 0014 keyed a part by `(job_id, submit)` alone: dstack's job ids are UUIDs, unique across
-- clusters. A job array's parts (0015) are Slurm records, whose raw ids each cluster hands out
-- on its own: two arrays on two clusters could share a raw id and a submit second, and each
-- posting of one would move the part to the other job. The key now starts with the cluster of
-- the job the record is a part of (every part is a record of its job's cluster).
create table api_job_parts_new (
    cluster text not null,
    job_id text not null,
    submit integer not null,
    api_job_id integer not null references api_jobs (id),
    primary key (cluster, job_id, submit)
) strict, without rowid;
insert into api_job_parts_new (cluster, job_id, submit, api_job_id)
    select j.cluster, p.job_id, p.submit, p.api_job_id
    from api_job_parts p join api_jobs j on j.id = p.api_job_id;
drop table api_job_parts;
alter table api_job_parts_new rename to api_job_parts;
create index api_job_parts_by_job on api_job_parts (api_job_id);
