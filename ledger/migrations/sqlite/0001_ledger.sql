-- bursar ledger, SQLite schema v1.
--
-- Conventions (shared with the PostgreSQL schema to come):
-- * money is an integer count of micros (`integer` here, `bigint` there), never real/numeric;
-- * times are Unix epoch seconds, UTC (`integer`);
-- * every table is STRICT, so a value of the wrong type is refused instead of converted. This
--   matters for money: SQLite turns an overflowing integer `+` into a real, and a STRICT integer
--   column refuses that real, so an overflow aborts the transaction instead of losing precision;
-- * the journal is the hot table (one row per job record imported, at hundreds of thousands of
--   rows per second), so its rows are integers wherever possible: accounts by id, and every
--   other repeated string (currency, cluster, user, partition, qos, state, price version)
--   interned once in `labels`. Binding a text value costs about four integers. The `*_view`
--   views at the end give the same data with names, for people reading the database.

-- The account tree. `root` (id 1) always exists and is the only account without a parent.
create table accounts (
    id integer primary key,
    name text not null unique,
    parent_id integer references accounts (id),
    created_at integer not null,
    check ((name = 'root') = (parent_id is null))
) strict;
create index accounts_by_parent on accounts (parent_id);
insert into accounts (id, name, parent_id, created_at) values (1, 'root', null, 0);

-- Interned strings. Label 0 is '', which stands for "none" (a job without a QOS, a manual entry
-- without a user), so that dimension columns are never null and group and join simply.
create table labels (
    id integer primary key,
    value text not null unique
) strict;
insert into labels (id, value) values (0, '');

-- Users and the accounts they may charge. The default account is always also an association
-- (the ledger adds it).
create table users (
    name text primary key,
    default_account_id integer not null references accounts (id),
    created_at integer not null
) strict;

create table associations (
    user_name text not null references users (name),
    account_id integer not null references accounts (id),
    created_at integer not null,
    primary key (user_name, account_id)
) strict, without rowid;

-- Allocations: `amount` micros of a currency for an account during [period_start, period_end).
-- Periods of one account in one currency never overlap (checked by the ledger in the
-- transaction that writes them). `charged` and `held` are materialized: the sums of the usage
-- (charge, adjustment, refund) and hold (hold, release) journal entries of the account's whole
-- subtree whose `effective_at` lies in the period. `amount` is the sum of the `deposit` entries
-- of the account in the period; `revision` numbers the changes made by `set_allocation`.
create table allocations (
    id integer primary key,
    account_id integer not null references accounts (id),
    currency_id integer not null references labels (id),
    amount integer not null check (amount >= 0),
    period_start integer not null,
    period_end integer not null,
    charged integer not null default 0,
    held integer not null default 0,
    revision integer not null default 0,
    created_at integer not null,
    updated_at integer not null,
    check (period_start < period_end),
    unique (account_id, currency_id, period_start)
) strict;

-- Job identities (cluster, job_id, submit) and their current posting: `entry_id` is the latest
-- journal entry of the job, which carries the current revision, account, effective time and
-- dimensions; `amount` is what all the job's entries add up to (the current revision's cost).
-- `display_id` is null when it equals `job_id`.
create table jobs (
    id integer primary key,
    cluster_id integer not null references labels (id),
    job_id text not null,
    submit integer not null,
    display_id text,
    entry_id integer not null,
    amount integer not null,
    unique (cluster_id, job_id, submit)
) strict;

-- The journal: append-only, one row per movement.
--
-- `type` says what the entry is; `kind` (derived) is the journal kind of the API:
--   1 deposit    (kind deposit)    changes the allocated amount of the account's own allocation
--   2 charge     (kind charge)     first posting of a job identity           job_count +1
--   3 adjust     (kind adjustment) a job's new revision, same groups         job_count  0
--   4 reverse    (kind adjustment) the old posting taken back where it was   job_count -1
--   5 repost     (kind adjustment) the new revision posted where it belongs  job_count +1
--   6 manual     (kind adjustment) an adjustment by hand                     job_count  0
--   7 refund     (kind refund)     usage given back by hand (negative)
--   8 hold       (kind hold)       a hold placed (positive)
--   9 release    (kind release)    a hold released, settled or expired (negative)
-- `amount` is signed usage: positive draws on allocations. Summing `job_count` over any group
-- counts the jobs whose money is in that group.
--
-- Idempotency: job entries are unique by (job, revision, type) — a revision is charged,
-- adjusted, reversed or re-posted at most once — and every other entry by its `key` (the
-- caller's, or `hold:{id}`, `release:{id}`, `allocation:{id}:{revision}`). `journal_view`
-- spells both as one `idempotency_key`: `charge:{cluster}:{job_id}:{submit}:{revision}` (and
-- `adjust:`, `reverse:` with the reversed revision, `repost:`), `%` and `:` escaped in parts.
--
-- Dimension columns hold label ids (0 = none). `job` has no foreign key (nor `account_id`):
-- the ledger writes both in the same transaction, and a per-row probe costs import rate.
create table journal (
    id integer primary key,
    type integer not null check (type between 1 and 9),
    account_id integer not null,
    currency_id integer not null,
    amount integer not null,
    effective_at integer not null,
    posted_at integer not null,
    job integer,
    revision text,
    is_final integer,
    cluster_id integer not null default 0,
    user_id integer not null default 0,
    partition_id integer not null default 0,
    qos_id integer not null default 0,
    state_id integer not null default 0,
    price_version_id integer not null default 0,
    hold_id integer,
    key text,
    note text,
    kind text generated always as (
        case type
            when 1 then 'deposit' when 2 then 'charge' when 7 then 'refund'
            when 8 then 'hold' when 9 then 'release' else 'adjustment'
        end) virtual,
    job_count integer generated always as (
        case type when 2 then 1 when 4 then -1 when 5 then 1 else 0 end) virtual,
    check ((job is null) = (key is not null)),
    check (job is null or (revision is not null and type between 2 and 5))
) strict;
create unique index journal_job_entries on journal (job, revision, type) where job is not null;
create unique index journal_keys on journal (key) where key is not null;

-- Per (account, currency) totals of the account's own entries, all time: usage and holds.
create table account_totals (
    account_id integer not null,
    currency_id integer not null,
    charged integer not null default 0,
    held integer not null default 0,
    primary key (account_id, currency_id)
) strict, without rowid;

-- Daily usage rollup: usage entries summed by UTC day (`day` = epoch seconds of 00:00 UTC) and
-- every dimension a report groups by (label ids, 0 = none).
create table usage_daily (
    day integer not null,
    account_id integer not null,
    currency_id integer not null,
    user_id integer not null,
    cluster_id integer not null,
    partition_id integer not null,
    qos_id integer not null,
    amount integer not null,
    job_count integer not null,
    primary key (day, account_id, currency_id, user_id, cluster_id, partition_id, qos_id)
) strict, without rowid;

-- Holds (liens). A hold counts against the allocations covering `placed_at` on its account's
-- chain until it is released, settled (its job's final usage arrived) or expired. Every
-- placement and closing is also a `hold` / `release` journal entry.
create table holds (
    id integer primary key,
    idempotency_key text not null unique,
    account_id integer not null references accounts (id),
    currency_id integer not null references labels (id),
    amount integer not null check (amount > 0),
    cluster_id integer not null references labels (id),
    job_ref text,
    placed_at integer not null,
    expires_at integer not null,
    state text not null default 'active'
        check (state in ('active', 'released', 'settled', 'expired')),
    closed_at integer,
    reason text,
    note text
) strict;
create index holds_active_by_job on holds (cluster_id, job_ref) where state = 'active';
create index holds_active_by_expiry on holds (expires_at) where state = 'active';

-- Lines bursar could not understand, kept with where they came from and why.
create table quarantine (
    id integer primary key,
    source text not null,
    line integer,
    reason text not null,
    raw text not null,
    first_seen integer not null
) strict;
create unique index quarantine_identity on quarantine (source, ifnull(line, -1), raw);

-- Collector positions, one opaque value per cluster.
create table cursors (
    cluster text primary key,
    value text not null,
    updated_at integer not null
) strict;

-- Readable views.
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
left join jobs jb on jb.id = j.job
join labels u on u.id = j.user_id
join labels p on p.id = j.partition_id
join labels q on q.id = j.qos_id
join labels s on s.id = j.state_id
join labels pv on pv.id = j.price_version_id;

create view jobs_view as
select
    cl.value as cluster, jb.job_id, jb.submit, coalesce(jb.display_id, jb.job_id) as display_id,
    e.revision, e.is_final, a.name as account, cur.value as currency, jb.amount, e.effective_at,
    u.value as user_name, nullif(p.value, '') as partition_name, nullif(q.value, '') as qos,
    s.value as state, nullif(pv.value, '') as price_version, e.posted_at as updated_at
from jobs jb
join journal e on e.id = jb.entry_id
join labels cl on cl.id = jb.cluster_id
join accounts a on a.id = e.account_id
join labels cur on cur.id = e.currency_id
join labels u on u.id = e.user_id
join labels p on p.id = e.partition_id
join labels q on q.id = e.qos_id
join labels s on s.id = e.state_id
join labels pv on pv.id = e.price_version_id;
