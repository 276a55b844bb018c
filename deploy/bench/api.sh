#!/usr/bin/env bash
# The HTTP API benchmark of docs/benchmarks.md ("HTTP API: quotes and admissions"): quotes/s and
# admissions/s with p50/p99 latency at 64 concurrent keep-alive clients on loopback, against
# bursar's own router served by axum on 127.0.0.1:0 (see gateway/src/bin/bursar-bench-api.rs):
#
#   healthz       GET /healthz — what HTTP and the load generator alone cost on this machine
#   quotes        POST /v1/quotes (two clusters quoted)
#   admit-stub    POST /v1/jobs forwarded to an in-process stub that answers at once
#   admit-slurm   POST /v1/jobs forwarded to the dev stack's real slurmrestd (onprem)
#   direct-slurm  the same jobs straight to that slurmrestd: the baseline of bursar's overhead
#
# Prints machine facts, a markdown table (median of BENCH_RUNS runs) and whether each target
# is met. The Slurm scenarios submit one-minute `true` jobs as alice and cancel every one of
# them afterwards; they need the dev stack (sudo deploy/dev/up.sh). The cancelled jobs stay in
# the stack's accounting database: run the tests on a fresh stack afterwards
# (deploy/dev/stop.sh --wipe), or slurmrestd may exhaust memory answering for all of them.
#
#   deploy/bench/api.sh [extra bursar-bench-api flags, e.g. --scenarios quotes,admit-stub]
#
# Flags that locate bursar's cost (no verdict on a target): --stub-delay-ms 30 (the stub answers
# after 30 ms, as slurmrestd does under load), --bare-proxy (a bare HTTP proxy instead of bursar
# in admit-slurm), --server-threads N.
#
# Environment:
#   BENCH_DIR        work directory: the measured binary and logs (default /var/tmp/bursar-bench)
#   BENCH_RUNS       runs of each scenario; the table shows the median (default 3)
#   BENCH_SECONDS    measured seconds of each local scenario (default 10)
#   BENCH_SLURM_JOBS measured submissions of each Slurm scenario per run (default 2000), in
#                    blocks the two scenarios take turns with (bursar-bench-api --slurm-blocks)
#   BENCH_SLURM_RUNS runs of the Slurm pair (default 5); bursar's overhead is the median over
#                    the runs of each run's own comparison
#   BENCH_IDLE_BUSY  if set (e.g. 10), wait before each run until other processes use less than
#                    that percentage of the CPU (for at most BENCH_IDLE_WAIT seconds, default
#                    600). What others used during each run is reported either way.
#   BENCH_BIN        a folder holding an already built `bursar-bench-api` to measure instead of
#                    building
#   BENCH_SPLIT_CPUS if set, the dev stack's daemons (every process with a pid file under
#                    BURSAR_DEV_DIR: slurmctld, slurmd, slurmrestd, slurmdbd, MariaDB, munged,
#                    dstack) run on CPU 0 and the benchmark (clients and bursar) on the others,
#                    as when bursar runs on a login node beside the controller; the daemons get
#                    every CPU back when the script ends
#   CARGO_TARGET_DIR as for cargo
set -euo pipefail

RUNS=${BENCH_RUNS:-3}
SECONDS_EACH=${BENCH_SECONDS:-10}
SLURM_JOBS=${BENCH_SLURM_JOBS:-2000}
SLURM_RUNS=${BENCH_SLURM_RUNS:-5}
BENCH_DIR=${BENCH_DIR:-/var/tmp/bursar-bench}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEV_DIR=${BURSAR_DEV_DIR:-/var/tmp/bursar-dev}
SLURM_ENV=$DEV_DIR/slurm/env.sh

say() { printf '%s\n' "$*" >&2; }

mkdir -p "$BENCH_DIR"/{bin,logs}

if [[ -n ${BENCH_BIN:-} ]]; then
    BUILT=$BENCH_BIN
else
    say "building the release benchmark binary"
    (cd "$ROOT" && cargo build --release --quiet -p bursar-gateway --bin bursar-bench-api)
    BUILT=${CARGO_TARGET_DIR:-$ROOT/target}/release
fi
# A private copy: a concurrent rebuild can't swap the binary mid-run.
BENCH=$BENCH_DIR/bin/bursar-bench-api
[[ $BUILT/bursar-bench-api -ef $BENCH ]] || cp "$BUILT/bursar-bench-api" "$BENCH"

run=()
if [[ -n ${BENCH_SPLIT_CPUS:-} ]]; then
    ncpu=$(nproc)
    if ((ncpu < 2)); then
        say "BENCH_SPLIT_CPUS needs at least 2 CPUs; this machine has $ncpu"
        exit 2
    fi
    mapfile -t stack_pids < <(find "$DEV_DIR" -name '*.pid' -exec cat {} + 2>/dev/null | sort -un)
    if ((${#stack_pids[@]} == 0)); then
        say "BENCH_SPLIT_CPUS: no pid files under $DEV_DIR (start the dev stack: deploy/dev/up.sh)"
        exit 2
    fi
    give_back() {
        for pid in "${stack_pids[@]}"; do
            taskset -a -p -c "0-$((ncpu - 1))" "$pid" >/dev/null 2>&1 || true
        done
    }
    trap give_back EXIT
    pinned=0
    for pid in "${stack_pids[@]}"; do
        taskset -a -p -c 0 "$pid" >/dev/null 2>&1 && pinned=$((pinned + 1))
    done
    run=(taskset -c "1-$((ncpu - 1))")
    say "split CPUs: $pinned dev-stack processes on CPU 0, the benchmark on CPUs 1-$((ncpu - 1))"
fi

idle=()
[[ -n ${BENCH_IDLE_BUSY:-} ]] && idle=(--idle-below "$BENCH_IDLE_BUSY" --idle-wait "${BENCH_IDLE_WAIT:-600}")

if [[ -r $SLURM_ENV ]]; then
    # shellcheck disable=SC1090
    . "$SLURM_ENV"
    queued_before=$(SLURM_CONF=$BURSAR_DEV_ONPREM_CONF squeue -h -n bursar-bench-api 2>/dev/null | wc -l || echo "?")
else
    say "no $SLURM_ENV: the Slurm scenarios will fail (start the dev stack: sudo deploy/dev/up.sh)"
    queued_before="?"
fi

LOG=$BENCH_DIR/logs/api-$(date -u +%Y%m%dT%H%M%SZ).log
say "machine: $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), \
$(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM, $(uname -sr), \
load average $(cut -d' ' -f1-3 /proc/loadavg)"
say "measuring $BENCH (sha256 $(sha256sum "$BENCH" | cut -c1-12)) at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); progress in $LOG"

"${run[@]}" "$BENCH" --runs "$RUNS" --seconds "$SECONDS_EACH" --slurm-jobs "$SLURM_JOBS" --slurm-runs "$SLURM_RUNS" \
    --slurm-env "$SLURM_ENV" "${idle[@]}" "$@" 2> >(tee "$LOG" >&2)

if [[ -r $SLURM_ENV ]]; then
    left=$(SLURM_CONF=$BURSAR_DEV_ONPREM_CONF squeue -h -n bursar-bench-api 2>/dev/null | wc -l || echo "?")
    say "onprem queue: $queued_before bursar-bench-api jobs before, $left after"
fi
say "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
