-- bursar ledger, SQLite schema v2: what the gateway keeps beside the ledger.
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC). Names are stored
-- as text here, not interned: these tables grow by one row per API call, not per job record.

-- Every administrative change (accounts, associations, allocations, …): who, in which role,
-- when, what, and the object before and after as JSON (null when it did not exist / was
-- removed). Append-only: the triggers refuse updates and deletes.
create table audit_log (
    id integer primary key,
    at integer not null,
    actor text not null,
    role text not null,
    action text not null,
    target text not null,
    before_json text,
    after_json text
) strict;
create index audit_log_by_at on audit_log (at);
create trigger audit_log_no_update before update on audit_log
begin
    select raise(abort, 'audit_log is append-only');
end;
create trigger audit_log_no_delete before delete on audit_log
begin
    select raise(abort, 'audit_log is append-only');
end;

-- Jobs submitted through the gateway's API: the request as received, the route chosen, the
-- estimate and the hold placed for it, and where the job is in its life (`state`: held,
-- settled, cancelled, expired, failed, …). `idempotency_key` is the client's
-- `Idempotency-Key`, unique when present. `cluster_job_id` is known once the cluster
-- accepted the job. `user_name` is the user the job runs as; `actor` who submitted it.
create table api_jobs (
    id integer primary key,
    idempotency_key text unique,
    actor text not null,
    user_name text not null,
    account text not null,
    cluster text not null,
    cluster_job_id text,
    currency text not null,
    estimate integer not null check (estimate >= 0),
    hold_id integer references holds (id),
    state text not null,
    request_json text not null,
    route_json text not null,
    submitted_at integer not null,
    updated_at integer not null
) strict;
create index api_jobs_by_cluster_job on api_jobs (cluster, cluster_job_id);
create index api_jobs_by_user on api_jobs (user_name);
create index api_jobs_by_hold on api_jobs (hold_id) where hold_id is not null;
