-- bursar ledger, SQLite: admin operations (closing accounts, refunds against a job).
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).

-- When the account was closed (null: open). A closed account and its whole subtree take no
-- new holds, allocations, deposits in or associations; usage that still arrives for them is
-- charged as always.
alter table accounts add column closed_at integer;

-- The job (`jobs.id`) a manual refund gives money back for. A refund is keyed, so it cannot
-- use `job` (which marks the job's own postings and is unique per revision and type);
-- `job_ref` lets statements and the refund cap find the refunds of a job.
alter table journal add column job_ref integer;
create index journal_refunds_by_job on journal (job_ref) where job_ref is not null;

-- The journal view names the job of a refund too.
drop view journal_view;
create view journal_view as
select
    j.id,
    coalesce(j.key,
        case j.type when 2 then 'charge' when 3 then 'adjust' when 4 then 'reverse' else 'repost' end
        || ':' || replace(replace(cl.value, '%', '%25'), ':', '%3A')
        || ':' || replace(replace(jb.job_id, '%', '%25'), ':', '%3A')
        || ':' || jb.submit
        || ':' || replace(replace(j.revision, '%', '%25'), ':', '%3A')) as idempotency_key,
    j.kind, a.name as account, cur.value as currency, j.amount,
    j.job_count, j.effective_at, j.posted_at, nullif(cl.value, '') as cluster, jb.job_id,
    coalesce(jb.display_id, jb.job_id) as display_id, jb.submit, nullif(u.value, '') as user_name,
    nullif(p.value, '') as partition_name, nullif(q.value, '') as qos,
    nullif(s.value, '') as state, j.revision, nullif(pv.value, '') as price_version, j.hold_id,
    j.note
from journal j
join accounts a on a.id = j.account_id
join labels cur on cur.id = j.currency_id
join labels cl on cl.id = j.cluster_id
left join jobs jb on jb.id = coalesce(j.job, j.job_ref)
join labels u on u.id = j.user_id
join labels p on p.id = j.partition_id
join labels q on q.id = j.qos_id
join labels s on s.id = j.state_id
join labels pv on pv.id = j.price_version_id;
