#!/usr/bin/env bash
# Reads that must not grow with the ledger's history (docs/benchmarks.md, "Reads over a long
# history"): a ledger holding N imported sacct records, N holds closed long ago and the N API
# jobs they were placed for (written with sqlite3 as a year of admissions through bursar leaves
# them: settled), then each read once cold and three times warm, with its peak RSS:
#
#   bursar balance physics --format json   the balance with its forecast (the balance API)
#   bursar forecast                        every allocation's burn rate
#   GET /v1/jobs/{id}                      one job's view, through a running bursar serve
#   GET /v1/jobs?state=failed              a listing by a state no job is in
#   GET /v1/jobs?account=chemistry         finance: an account with one job among N
#   bursar charges -M cloud                every job of a cluster (reads that cluster's journal)
#   bursar charges -M cloud --from --to    a month of them
#
#   deploy/bench/history.sh [N]            N defaults to 1000000
#
# Environment: BENCH_DIR (default /var/tmp/bursar-bench-history), BENCH_BIN (a folder with
# already built `bursar` and `bursar-gen-sacct`, e.g. an older bursar's), BENCH_PORT (default
# 18645), BENCH_JOB_STATE (the API jobs' recorded state, default `settled`; `held` is how a
# bursar before migration 0010 left jobs nobody had looked at).
set -euo pipefail

N=${1:-1000000}
BENCH_DIR=${BENCH_DIR:-/var/tmp/bursar-bench-history}
PORT=${BENCH_PORT:-18645}
JOB_STATE=${BENCH_JOB_STATE:-settled}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
say() { printf '%s\n' "$*" >&2; }

mkdir -p "$BENCH_DIR"
if [[ -n ${BENCH_BIN:-} ]]; then
    BIN=$BENCH_BIN
else
    say "building bursar and bursar-gen-sacct (release)"
    (cd "$ROOT" && cargo build --release --quiet -p bursar-gateway --bin bursar \
        && cargo build --release --quiet -p bursar-collectors --bin bursar-gen-sacct)
    BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
fi
BURSAR=$BIN/bursar
DB=$BENCH_DIR/ledger.db
CONFIG=$BENCH_DIR/bursar.yaml

# The import benchmark's configuration, with physics and chemistry for the API jobs, and a
# listen address and key for bursar serve.
{
    sed -n '/^database:/!p' "$ROOT/deploy/bench/bursar-bench.yaml"
    printf '  physics: {}\n  chemistry: {}\n'
    printf 'listen: 127.0.0.1:%s\nauth: {hs256_key_file: token.key}\n' "$PORT"
} > "$CONFIG"
[[ -e $BENCH_DIR/token.key ]] || "$BURSAR" -c "$CONFIG" token keygen >/dev/null
run() { "$BURSAR" -c "$CONFIG" --database "sqlite://$DB" "$@"; }

say "building the ledger: $N sacct records over 365 days, $N settled holds and API jobs"
rm -f "$DB" "$DB-wal" "$DB-shm"
"$BIN/bursar-gen-sacct" --records "$N" --seed 42 --start 2025-11-25 --days 365 | run import - >&2
run alloc set physics --currency su --amount 100000000 >/dev/null
sqlite3 "$DB" >/dev/null <<EOF
insert into labels (value) select 'onprem' where not exists (select 1 from labels where value = 'onprem');
with recursive n(i) as (select 1 union all select i + 1 from n where i < $N)
insert into holds (idempotency_key, account_id, currency_id, amount, cluster_id, job_ref,
    placed_at, expires_at, state, closed_at, reason, note)
select 'history-' || i, (select id from accounts where name = 'physics'),
    (select id from labels where value = 'su'), 1000000,
    (select id from labels where value = 'onprem'), 'h' || i,
    1764000000 + 30 * i, 1764003600 + 30 * i, 'settled', 1764000600 + 30 * i,
    'settled: final usage arrived', 'api submission by alice'
from n;
insert into api_jobs (idempotency_key, actor, user_name, account, cluster, currency, estimate,
    hold_id, state, request_json, route_json, submitted_at, updated_at, cluster_job_id)
select null, 'alice', 'alice', 'physics', 'onprem', 'su', 1000000, h.id, '$JOB_STATE',
    '{"account":"physics","ntasks":1,"time_limit_min":1,"script":"#!/bin/sh\ntrue\n"}',
    '{"cluster":"onprem"}', h.placed_at, h.closed_at, h.job_ref
from holds h where h.idempotency_key like 'history-%';
insert into api_jobs (idempotency_key, actor, user_name, account, cluster, currency, estimate,
    hold_id, state, request_json, route_json, submitted_at, updated_at, cluster_job_id)
values (null, 'bob', 'bob', 'chemistry', 'onprem', 'su', 1000000, null, 'cancelled', '{}', '{}',
    1764000000, 1764000000, null);
pragma wal_checkpoint(truncate);
EOF
say "ledger: $(sqlite3 "$DB" 'select count(*) from journal') journal entries, \
$(sqlite3 "$DB" 'select count(*) from holds') holds, $(sqlite3 "$DB" 'select count(*) from api_jobs') API jobs, \
$(du -m "$DB" | cut -f1) MB"

# time_cmd LABEL ARGS...: the bursar command, once cold (first after the ledger was built or
# the server started) and three times warm; prints a row.
printf '| read | cold s | warm s (median of 3) | peak RSS MB |\n|---|---:|---:|---:|\n'
row() { printf '| %s | %s | %s | %s |\n' "$1" "$2" "$(printf '%s\n' "${@:3:3}" | sort -n | sed -n 2p)" "$6"; }
time_cmd() {
    local label=$1; shift
    local times=() rss=0 t0 t1 kb
    for _ in 1 2 3 4; do
        t0=$(date +%s%N)
        if ! /usr/bin/time -f '%M' -o "$BENCH_DIR/time" "$BURSAR" -c "$CONFIG" \
            --database "sqlite://$DB" "$@" >/dev/null 2>"$BENCH_DIR/err"; then
            # An older bursar may not know the command: say so and go on.
            printf '| %s | failed: %s | | |\n' "$label" "$(grep -v WARN "$BENCH_DIR/err" | head -1)"
            return 0
        fi
        t1=$(date +%s%N)
        times+=("$(awk -v d=$(( t1 - t0 )) 'BEGIN { printf "%.3f", d / 1e9 }')")
        kb=$(tail -1 "$BENCH_DIR/time"); (( kb > rss )) && rss=$kb
    done
    row "$label" "${times[@]}" "$(( rss / 1024 ))"
}
time_cmd '`bursar balance physics --format json`' balance physics --format json
time_cmd '`bursar forecast`' forecast
time_cmd '`bursar charges -M cloud`' charges -M cloud --format csv
time_cmd '`bursar charges -M cloud --from 2026-06-01 --to 2026-07-01`' \
    charges -M cloud --from 2026-06-01 --to 2026-07-01 --format csv

TOKEN=$("$BURSAR" -c "$CONFIG" token issue --user fin --role finance --ttl 1h 2>/dev/null)
"$BURSAR" -c "$CONFIG" --database "sqlite://$DB" serve > "$BENCH_DIR/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null && wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break; sleep 0.2; done
if ! kill -0 "$SERVER" 2>/dev/null || ! curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz"; then
    say "bursar serve did not start (BENCH_PORT=$PORT):"; cat "$BENCH_DIR/serve.log" >&2; exit 1
fi
time_get() {
    local label=$1 path=$2 times=()
    for _ in 1 2 3 4; do
        times+=("$(curl -sf -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $TOKEN" \
            "http://127.0.0.1:$PORT$path" | awk '{ printf "%.3f", $1 }')")
    done
    row "$label" "${times[@]}" "$(( $(awk '/VmHWM/ { print $2 }' /proc/$SERVER/status) / 1024 ))"
}
time_get '`GET /v1/jobs/{id}`' "/v1/jobs/$(( N / 2 ))"
time_get '`GET /v1/jobs?state=failed`' '/v1/jobs?state=failed'
time_get '`GET /v1/jobs?account=chemistry`' '/v1/jobs?account=chemistry'
time_get '`GET /v1/accounts/physics/balance`' '/v1/accounts/physics/balance'
say "peak RSS of the GET rows: the server's so far (VmHWM, cumulative)"
