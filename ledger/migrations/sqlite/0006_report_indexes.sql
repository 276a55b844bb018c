-- bursar ledger, SQLite: what reports, statements and forecasts read instead of the whole
-- journal (docs/benchmarks.md, "Reports over 10,000,000 journal entries").
--
-- Same conventions as 0001 (STRICT tables, integer micros, epoch seconds UTC).

-- The journal by UTC day, then account, currency and time: the entries of any time range
-- (one seek per day, then per account), for a statement's movements (its subtree's accounts),
-- the edges of a report or forecast window that does not fall on UTC day boundaries, and
-- deposits before a statement's period. `effective_at / 86400` is SQLite's integer division
-- (truncating), which queries repeat exactly so that SQLite uses this index. Day first, not
-- account first: an import appends to the few days it covers instead of to one place per
-- account and currency, which costs it about 6-13 % instead of 24-32 % (docs/benchmarks.md).
-- `type` is in the index so that an entry's kind is checked without reading its row.
create index journal_by_day on journal (effective_at / 86400, account_id, currency_id, effective_at, type);

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
