#!/usr/bin/env bash
# Reports over a 10,000,000-entry ledger (docs/benchmarks.md, "Reports over 10,000,000 journal
# entries"): the usage report by account and month, a statement, a forecast, each timed as a
# whole `bursar` process (start, open the ledger, read, print), warm and cold.
#
#   deploy/bench/reports.sh [RECORDS]        # default 10,000,000
#
# Builds the ledger once when it is missing: `bursar-gen-sacct --records N --seed S --days 365`
# piped into `bursar import -` (no dump file), with deploy/bench/bursar-bench.yaml and one
# allocation per division and currency for 2026, as import.sh does. Then prints a table.
#
# Settings (environment, all optional):
#   BENCH_DIR        ledger, logs                      (default /var/tmp/bursar-bench-10m)
#   BENCH_SEED       generator seed                    (default 42)
#   BENCH_RUNS       warm runs per measurement         (default 5; the median is reported)
#   BENCH_BIN        a folder with prebuilt `bursar` and `bursar-gen-sacct` to use
#   BENCH_ACCOUNT    the statement's account           (default proj119)
#   BENCH_DIVISION   a statement of a whole subtree    (default astro)
#   BENCH_IDLE_BUSY  wait before each measurement until other processes use less than this
#                    % of the CPU (BENCH_IDLE_WAIT, default 300, seconds at most)
#
# "Cold" drops the ledger's pages from the OS page cache first (posix_fadvise DONTNEED on the
# database files only, not the whole machine's cache) and runs once.
set -euo pipefail

N=${1:-10000000}
SEED=${BENCH_SEED:-42}
RUNS=${BENCH_RUNS:-5}
BENCH_DIR=${BENCH_DIR:-/var/tmp/bursar-bench-10m}
ACCOUNT=${BENCH_ACCOUNT:-proj119}
DIVISION=${BENCH_DIVISION:-astro}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CONFIG=$ROOT/deploy/bench/bursar-bench.yaml
LOGS=$BENCH_DIR/logs
mkdir -p "$BENCH_DIR/bin" "$LOGS"

say() { echo "reports.sh: $*" >&2; }

command -v /usr/bin/time >/dev/null || { say "installing time"; apt-get install -y -qq time >/dev/null; }
command -v sqlite3 >/dev/null || { say "installing sqlite3"; apt-get install -y -qq sqlite3 >/dev/null; }

# --- binaries ------------------------------------------------------------------------------
if [[ -n ${BENCH_BIN:-} ]]; then
    BUILT=$BENCH_BIN
else
    say "building release binaries"
    (cd "$ROOT" && cargo build --release --quiet --bin bursar --bin bursar-gen-sacct)
    BUILT=${CARGO_TARGET_DIR:-$ROOT/target}/release
fi
# A private copy, so that a concurrent rebuild can't change the binary mid-run.
cp "$BUILT/bursar" "$BUILT/bursar-gen-sacct" "$BENCH_DIR/bin/"
BURSAR=$BENCH_DIR/bin/bursar
GEN=$BENCH_DIR/bin/bursar-gen-sacct

# --- the ledger ----------------------------------------------------------------------------
DB=$BENCH_DIR/ledger-$N-seed$SEED.db
run() { "$BURSAR" -c "$CONFIG" --database "sqlite://$DB" "$@"; }
if [[ ! -s $DB ]]; then
    free=$(df --output=avail -k "$BENCH_DIR" | tail -1)
    (( free > N / 2 )) || { say "need about $(( N / 5000000 ))GB free in $BENCH_DIR"; exit 1; }
    say "building the ledger: $N records over 365 days (seed $SEED) into $DB"
    rm -f "$DB.tmp" "$DB.tmp-wal" "$DB.tmp-shm"
    for division in astro bio chem eng; do
        "$BURSAR" -c "$CONFIG" --database "sqlite://$DB.tmp" alloc set "$division" \
            --currency su --amount 50000000 --from 2026-01-01 --to 2027-01-01 >/dev/null
        "$BURSAR" -c "$CONFIG" --database "sqlite://$DB.tmp" alloc set "$division" \
            --currency usd --amount 5000000 --from 2026-01-01 --to 2027-01-01 >/dev/null
    done
    start=$(date +%s)
    "$GEN" --records "$N" --seed "$SEED" --days 365 \
        | "$BURSAR" -c "$CONFIG" --database "sqlite://$DB.tmp" import - >&2
    say "imported in $(( $(date +%s) - start )) s"
    sqlite3 "$DB.tmp" 'pragma wal_checkpoint(truncate)' >/dev/null
    mv "$DB.tmp" "$DB"
    rm -f "$DB.tmp-wal" "$DB.tmp-shm"
fi
# Opening the ledger applies pending migrations (a ledger built by an older bursar). The
# statement's account gets an allocation of its own for 2026 (setting it again changes
# nothing), so that its statements start counting on 2026-01-01: the opening balance of a
# December statement covers eleven months.
for currency in su usd; do
    run alloc set "$ACCOUNT" --currency "$currency" --amount 100000 \
        --from 2026-01-01 --to 2027-01-01 >/dev/null
done
sqlite3 "$DB" 'pragma wal_checkpoint(truncate)' >/dev/null
entries=$(sqlite3 "$DB" 'select count(*) from journal')
say "ledger $DB: $entries journal entries, $(du -m "$DB" | cut -f1) MB"

# --- measuring -----------------------------------------------------------------------------
drop_cache() {
    python3 - "$DB" "$DB-wal" "$DB-shm" <<'EOF'
import os, sys
for path in sys.argv[1:]:
    if os.path.exists(path):
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
EOF
}

# "busy total" jiffies of all cores, from /proc/stat.
cpu_jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }

# Percent of all cores busy over the next 2 seconds.
cpu_busy() {
    local a b
    a=$(cpu_jiffies); sleep 2; b=$(cpu_jiffies)
    awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); total = y[2] - x[2];
        printf "%.0f", (total > 0 ? 100 * (y[1] - x[1]) / total : 0) }'
}

# With BENCH_IDLE_BUSY set, waits (at most BENCH_IDLE_WAIT seconds, default 300) until other
# processes use less than that percent of the CPU.
wait_idle() {
    [[ -n ${BENCH_IDLE_BUSY:-} ]] || return 0
    local waited=0
    while (( $(cpu_busy) >= BENCH_IDLE_BUSY && waited < ${BENCH_IDLE_WAIT:-300} )); do
        sleep 8; waited=$(( waited + 10 ))
    done
}

# time_one NAME ARGS...: one run; appends "seconds peak_rss_kb" to $LOGS/NAME.runs (wall time
# from date +%N: /usr/bin/time's %e has 10 ms steps).
time_one() {
    local name=$1; shift
    local t0 t1
    t0=$(date +%s%N)
    /usr/bin/time -f '%M %U %S' -o "$LOGS/$name.time" "$BURSAR" -c "$CONFIG" \
        --database "sqlite://$DB" "$@" > "$LOGS/$name.out" 2> "$LOGS/$name.err"
    t1=$(date +%s%N)
    echo "$(( (t1 - t0) / 1000 )) $(tail -1 "$LOGS/$name.time")" \
        | awk '{ printf "%.6f %d %.2f\n", $1 / 1e6, $2, $3 + $4 }' >> "$LOGS/$name.runs"
}

# measure LABEL NAME ARGS...: one cold run, one warm-up, RUNS warm runs; prints a table row.
measure() {
    local label=$1 name=$2; shift 2
    rm -f "$LOGS/$name.runs" "$LOGS/$name-cold.runs"
    wait_idle
    drop_cache
    time_one "$name-cold" "$@"
    time_one "$name-warmup" "$@"
    local _ j0 j1
    wait_idle
    j0=$(cpu_jiffies)
    for _ in $(seq "$RUNS"); do time_one "$name" "$@"; done
    j1=$(cpu_jiffies)
    # Share of all cores that other processes kept busy during the warm runs: the cores'
    # busy time minus bursar's own CPU time (user + sys, 10 ms steps).
    local busy
    busy=$(awk -v a="$j0" -v b="$j1" -v hz="$(getconf CLK_TCK)" '
        { own += $3 }
        END { split(a, x, " "); split(b, y, " "); t = y[2] - x[2]
              o = (t > 0 ? 100 * ((y[1] - x[1]) - own * hz) / t : 0)
              printf "%.0f", (o < 0 ? 0 : o) }' "$LOGS/$name.runs")
    local lines
    lines=$(wc -l < "$LOGS/$name.out")
    read -r cold _ < "$LOGS/$name-cold.runs"
    sort -n -k1 "$LOGS/$name.runs" | awk -v label="$label" -v cold="$cold" -v lines="$lines" \
        -v busy="$busy" '
        { s[NR] = $1; m[NR] = $2 }
        END {
            mid = int((NR + 1) / 2)
            printf "| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %d%% |\n", label, lines,
                1000 * s[mid], 1000 * s[1], 1000 * s[NR], 1000 * cold, m[mid] / 1024, busy
        }'
}

say "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Ledger: $entries journal entries ($N records, seed $SEED, 365 days from 2026-01-01)."
echo
echo "| command | output lines | median ms | best ms | worst ms | cold ms | peak RSS MB | others' CPU |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
measure "\`report usage --by account,month\`, 2026-01-01 to 2027-02-01" report \
    report usage --from 2026-01-01 --to 2027-02-01 --by account,month --format csv
measure "\`report usage --by account,month --rollup\` (through the tree)" report-rollup \
    report usage --from 2026-01-01 --to 2027-02-01 --by account,month --rollup --format csv
measure "\`report usage --by account\`, 14 days not on day boundaries" report-odd \
    report usage --from 2026-07-01T12:34:56 --to 2026-07-15T12:34:56 --by account --format csv
measure "\`statement $ACCOUNT --currency usd\`, June 2026" statement \
    statement "$ACCOUNT" --currency usd --from 2026-06-01 --to 2026-07-01 --format csv
measure "\`statement $ACCOUNT --currency su\`, December 2026" statement-dec \
    statement "$ACCOUNT" --currency su --from 2026-12-01 --to 2027-01-01 --format csv
measure "\`statement $DIVISION --currency usd\` (50 accounts), June 2026" statement-division \
    statement "$DIVISION" --currency usd --from 2026-06-01 --to 2026-07-01 --format csv
measure "\`forecast --at 2026-07-15T12:34:56\` (14-day window)" forecast \
    forecast --at 2026-07-15T12:34:56 --format csv
measure "\`balance\` (materialized numbers only: the floor)" balance \
    balance --format csv
echo
echo "Warm: median, best and worst of $RUNS runs after a warm-up; cold: one run after dropping the"
echo "ledger's pages from the page cache. Each is a whole process (start, open, read, print)."
echo "Others' CPU: share of the $(nproc) cores other processes kept busy during the warm runs."
echo "Targets: report < 1 s (target 200 ms), statement of one account < 100 ms."
