-- bursar ledger, SQLite schema: alerts (see ledger/src/alerts.rs).
--
-- One row per firing of an alert on an allocation: `kind` is `used:P` (committed reached P %
-- of the allocated amount) or `projected` (forecast to run out before the period ends). The
-- numbers are the allocation's at firing. An alert is open until `rearmed_at` is set; at most
-- one alert per (allocation, kind) is open, so a crossing fires once even when two checkers
-- race. `delivered_at` is set once, after a successful delivery (`delivered_via`: webhook or
-- log); `attempts` and `last_error` count the failed ones; `claimed_until` keeps a delivery in
-- progress from being started twice.
create table alerts (
    id integer primary key,
    allocation_id integer not null references allocations (id),
    kind text not null,
    fired_at integer not null,
    allocated integer not null,
    charged integer not null,
    held integer not null,
    rate_per_day integer not null,
    exhaustion integer,
    rearmed_at integer,
    delivered_at integer,
    delivered_via text,
    attempts integer not null default 0,
    last_error text,
    claimed_until integer,
    check ((delivered_at is null) = (delivered_via is null))
) strict;
create unique index alerts_open on alerts (allocation_id, kind) where rearmed_at is null;
create index alerts_pending on alerts (id) where delivered_at is null;
