-- bursar ledger, SQLite: what reports, statements and forecasts read instead of the whole
-- journal (docs/benchmarks.md, "Reports over 10,000,000 journal entries").
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).

-- An account's entries in a currency by time: a statement's movements (the account's subtree,
-- one range per account), the edges of a report or forecast window that does not fall on UTC
-- day boundaries, deposits before a statement's period. `type` is in the index so that the
-- kind of an entry can be checked without reading its row. It costs the import one more
-- B-tree insert per entry.
create index journal_by_account_time on journal (account_id, currency_id, effective_at, type);

-- The daily rollup summed over users, clusters, partitions and QOS: usage (charge, adjustment,
-- refund entries) per account, currency and UTC day. The usage report by account and
-- day/week/month reads this (a row per account, currency and day instead of one per user,
-- cluster, partition and QOS as well); statements take their opening balance from it. Kept
-- with usage_daily, from the same deltas, in the same transaction.
create table usage_daily_accounts (
    account_id integer not null,
    currency_id integer not null,
    day integer not null,
    amount integer not null,
    job_count integer not null,
    primary key (account_id, currency_id, day)
) strict, without rowid;

insert into usage_daily_accounts (account_id, currency_id, day, amount, job_count)
select account_id, currency_id, day, sum(amount), sum(job_count)
from usage_daily
group by account_id, currency_id, day;
