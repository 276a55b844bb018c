#!/usr/bin/env python3
"""The baseline for docs/benchmarks.md: a sacct dump into SQLite the way sites do it today.

    python3 naive_import.py dump.psv journal.db

Standard library only: `csv` with `delimiter='|'`, `sqlite3`, `executemany`, one transaction
per 10,000 rows. It skips step lines, prices each job from AllocTRES with the same billing
weights and QOS factors as deploy/bench/bursar-bench.yaml, and inserts one row per job into a
`journal` table whose unique idempotency key (cluster:jobid:submit) makes a re-run harmless.

This is a baseline, not a reference implementation. It is written the way such scripts are
usually written, and it is deliberately not made slow:

* money is a Python float (core-hours and dollars rounded by whatever the float gives), not
  an exact decimal; bursar computes in integer micros with one half-even rounding;
* no end-state policy beyond "a job that never ran costs nothing" (NODE_FAIL is charged, a
  typed GPU weight is the only GPU subtlety), no requeue/adjustment handling (a re-run is
  `insert or ignore`), no account tree, no allocations, no balances, no daily rollup;
* timestamps are stored as the text sacct printed, not parsed;
* it gets the same durability settings as bursar's ledger (WAL, synchronous=NORMAL), so the
  comparison is about the work, not about fsync policy.
"""

import csv
import sqlite3
import sys

BATCH = 10_000

# Per unit-hour, as in bursar-bench.yaml. Memory weights are per GiB; AllocTRES memory is
# converted to GiB below.
WEIGHTS = {
    ("onprem", "batch"): {"cpu": 1.0, "mem": 0.25},
    ("onprem", "gpu"): {"cpu": 1.0, "mem": 0.25, "gres/gpu": 4.0, "gres/gpu:h100": 8.0},
    ("cloud", "batch"): {"cpu": 0.0425, "mem": 0.0053},
    ("cloud", "gpu"): {"cpu": 0.0425, "mem": 0.0053, "gres/gpu:a100": 2.50, "gres/gpu:h100": 4.10},
}
CURRENCY = {"onprem": "su", "cloud": "usd"}
QOS_FACTOR = {"normal": 1.0, "premium": 2.0, "standard": 0.5}
MEM_UNITS = {"K": 1 / 1024 / 1024, "M": 1 / 1024, "G": 1.0, "T": 1024.0}

SCHEMA = """
create table if not exists journal (
    id integer primary key,
    idempotency_key text not null unique,
    cluster text not null,
    job_id text not null,
    account text not null,
    user_name text not null,
    partition_name text,
    qos text,
    state text not null,
    submit text,
    start text,
    "end" text,
    elapsed integer,
    currency text not null,
    amount real not null
)
"""

INSERT = """
insert or ignore into journal (idempotency_key, cluster, job_id, account, user_name,
    partition_name, qos, state, submit, start, "end", elapsed, currency, amount)
values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


def tres_rate(alloc_tres, weights):
    """Billing rate per hour of an AllocTRES string: sum of weight x count; a typed GPU
    weight replaces the untyped one for those GPUs."""
    rate = 0.0
    typed_gpus = 0
    untyped_gpus = 0
    for item in alloc_tres.split(","):
        if not item:
            continue
        name, _, value = item.partition("=")
        if name == "mem":
            unit = value[-1]
            if unit in MEM_UNITS:
                gib = float(value[:-1]) * MEM_UNITS[unit]
            else:
                gib = float(value) / 1024
            rate += gib * weights.get("mem", 0.0)
        elif name == "gres/gpu":
            untyped_gpus = int(value)
        elif name.startswith("gres/gpu:"):
            weight = weights.get(name)
            if weight is not None:
                rate += int(value) * weight
                typed_gpus += int(value)
        elif name in weights:
            rate += float(value) * weights[name]
    rate += max(untyped_gpus - typed_gpus, 0) * weights.get("gres/gpu", 0.0)
    return rate


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: naive_import.py DUMP.psv DB.sqlite")
    dump, path = sys.argv[1], sys.argv[2]
    db = sqlite3.connect(path)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=normal")
    db.execute(SCHEMA)
    db.commit()

    jobs = steps = 0
    rows = []
    with open(dump, newline="") as f:
        reader = csv.reader(f, delimiter="|", quoting=csv.QUOTE_NONE)
        header = next(reader)
        col = {name: i for i, name in enumerate(header)}
        c_raw, c_cluster, c_account, c_user = col["JobIDRaw"], col["Cluster"], col["Account"], col["User"]
        c_part, c_qos, c_state = col["Partition"], col["QOS"], col["State"]
        c_submit, c_start, c_end = col["Submit"], col["Start"], col["End"]
        c_elapsed, c_tres = col["ElapsedRaw"], col["AllocTRES"]
        for r in reader:
            job_id = r[c_raw]
            if "." in job_id:
                steps += 1
                continue
            jobs += 1
            cluster, partition, qos = r[c_cluster], r[c_part], r[c_qos]
            elapsed = int(r[c_elapsed] or 0)
            weights = WEIGHTS.get((cluster, partition), {"cpu": 1.0})
            amount = tres_rate(r[c_tres], weights) * elapsed / 3600 * QOS_FACTOR.get(qos, 1.0)
            rows.append((
                f"{cluster}:{job_id}:{r[c_submit]}", cluster, job_id, r[c_account], r[c_user],
                partition, qos, r[c_state], r[c_submit], r[c_start], r[c_end], elapsed,
                CURRENCY.get(cluster, "su"), amount,
            ))
            if len(rows) >= BATCH:
                db.executemany(INSERT, rows)
                db.commit()
                rows.clear()
    if rows:
        db.executemany(INSERT, rows)
        db.commit()
    db.close()
    print(f"{dump}: {jobs} job records, {steps} steps skipped")


if __name__ == "__main__":
    main()
