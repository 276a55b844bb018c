#!/usr/bin/env bash
# bursar in front of real clusters, on one machine: builds bursar, starts the dev stack
# (deploy/dev/up.sh: two Slurm 22.05 clusters with slurmrestd + JWT, onprem billed in
# core-hours and cloud in dollars, and a dstack 0.22.5 server), writes a configuration for it,
# sets allocations, starts `bursar serve` in the background, and submits a first job as alice.
#
#   sudo deploy/start.sh                 # state in ./demo-live/ (kept between runs)
#   BURSAR_DEMO_DIR=/tmp/x BURSAR_DEMO_PORT=8650 deploy/start.sh
#
# Idempotent: a second run rebuilds if needed, repairs the stack, restarts the server on the
# same ledger and submits another job. Stop: kill "$(cat demo-live/serve.pid)"; deploy/dev/stop.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
demo="${BURSAR_DEMO_DIR:-$root/demo-live}"
port="${BURSAR_DEMO_PORT:-8640}"
url="http://127.0.0.1:$port"
SECONDS=0

step() { printf '\n==> %s [%ss]\n' "$*" "$SECONDS"; }
die() { echo "deploy/start.sh: $*" >&2; exit 1; }
# run CMD...: print it as typed, then run it (its status is returned).
run() { printf '\n$ %s\n' "$*"; "$@"; }

[ "$(id -u)" -eq 0 ] || die "run it as root (the dev stack installs Debian packages, and bursar reads the clusters' JWT key): sudo $0"
command -v cargo >/dev/null || die "cargo is required (Rust 1.94.1 or newer): https://rustup.rs"
command -v curl >/dev/null || die "curl is required: apt-get install -y curl"

# The servers install and start in the background while bursar compiles.
mkdir -p "$demo"
stack_log="$demo/dev-up.log"
step "starting the dev stack in the background (deploy/dev/up.sh, log: $stack_log)"
"$root/deploy/dev/up.sh" --no-next >"$stack_log" 2>&1 &   # the demo needs no Slurm 24.11
stack_pid=$!

step "building bursar (release)"
if ! cargo build --release --locked --quiet --manifest-path "$root/Cargo.toml" --bin bursar; then
  wait "$stack_pid" || true
  die "cargo build failed"
fi
bursar="$root/target/release/bursar"

step "waiting for the dev stack"
if ! wait "$stack_pid"; then
  tail -n 40 "$stack_log" >&2
  die "deploy/dev/up.sh failed (full log: $stack_log)"
fi
tail -n 4 "$stack_log"
dev_dir="${BURSAR_DEV_DIR:-/var/tmp/bursar-dev}"
# shellcheck disable=SC1091
. "$dev_dir/env.sh"
for v in BURSAR_DEV_ONPREM_REST BURSAR_DEV_CLOUD_REST BURSAR_DEV_JWT_KEY \
  BURSAR_DEV_DSTACK_URL BURSAR_DEV_DSTACK_PROJECT BURSAR_DEV_DSTACK_ADMIN_TOKEN; do
  [ -n "${!v:-}" ] || die "$v is not set by $dev_dir/env.sh: is the stack up? (deploy/dev/check.sh)"
done

# A server left by an earlier run: stop it, but only if its pid file names a bursar serve.
if [ -f "$demo/serve.pid" ]; then
  old=$(cat "$demo/serve.pid")
  if [ -r "/proc/$old/cmdline" ] && tr '\0' ' ' <"/proc/$old/cmdline" | grep -q 'bursar.* serve'; then
    step "stopping the bursar server of an earlier run (pid $old)"
    kill "$old"
    for _ in $(seq 50); do [ -e "/proc/$old" ] || break; sleep 0.2; done
  fi
  rm -f "$demo/serve.pid"
fi
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  die "port $port is in use by something else: BURSAR_DEMO_PORT=<free port> $0"
fi

step "writing the configuration ($demo/bursar.yaml)"
umask 077
printf '%s\n' "$BURSAR_DEV_DSTACK_ADMIN_TOKEN" >"$demo/dstack.token"
cat >"$demo/bursar.yaml" <<EOF
# Written by deploy/start.sh for the dev stack of deploy/dev (docs/configuration.md).
database: sqlite://bursar.db
listen: 127.0.0.1:$port
auth: {hs256_key_file: jwt.key}
accounts:
  org: {description: "the organisation"}
  physics: {parent: org}
  chemistry: {parent: org}
  hpc: {description: "dstack project runs not submitted through bursar"}
users:
  alice: {default_account: physics}
  bob: {default_account: chemistry}
  carol: {default_account: physics, accounts: [chemistry]}
routing:
  prefer: [onprem, cloud]          # onprem first; burst to cloud when su run out
clusters:
  onprem:                          # 2 nodes x 8 CPUs, 2 GPUs each (+ op-t1, partition smt); billed in core-hours
    kind: slurm
    currency: su
    timezone: UTC
    partitions:
      batch: {weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0"}   # = its TRESBillingWeights
      smt: {weights: "CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0"}
    qos:
      premium: {usage_factor: 2.0}
    collect:
      slurmrestd: {url: "$BURSAR_DEV_ONPREM_REST", jwt_key_file: "$BURSAR_DEV_JWT_KEY", api_version: v0.0.38}
      interval: 10s
      overlap: 10m
      start: "$(date -u -d '-1 day' +%Y-%m-%dT%H:%M:%S)"
    submit:
      default_partition: batch
      licenses: {matlab: 4}        # = its Licenses=
      partitions:
        batch: {max_time: 1d, default_time: 1h, def_mem_per_cpu_mb: 1000, max_nodes: 2, node_cpus: 8, node_mem_mb: 16000, node_gpus: 2}
        # op-t1: 4 cores of 2 threads, allocated in whole cores (try --hint=nomultithread)
        smt: {max_time: 1d, default_time: 1h, def_mem_per_cpu_mb: 1000, gpu_types: [], max_nodes: 1, node_cpus: 8, node_mem_mb: 16000, node_threads_per_core: 2}
  cloud:                           # 1 node, 2 x h100; billed in dollars
    kind: slurm
    currency: usd
    timezone: UTC
    partitions:
      gpu: {weights: "CPU=0.0425,Mem=0.0053G,GRES/gpu=2.50"}
    default_partition: {weights: "CPU=0.0425,Mem=0.0053G,GRES/gpu=2.50"}
    qos:
      premium: {usage_factor: 2.0}
    collect:
      slurmrestd: {url: "$BURSAR_DEV_CLOUD_REST", jwt_key_file: "$BURSAR_DEV_JWT_KEY", api_version: v0.0.38}
      interval: 10s
      overlap: 10m
      start: "$(date -u -d '-1 day' +%Y-%m-%dT%H:%M:%S)"
    submit:
      default_partition: gpu
      licenses: {}                 # it has none
      partitions:
        gpu: {max_time: 1d, default_time: 1h, def_mem_per_cpu_mb: 1000, gpu_types: [h100], max_nodes: 1, node_cpus: 8, node_mem_mb: 16000, node_gpus: 2}
  gpucloud:                        # the dstack server (no backends here: runs fail for lack of capacity)
    kind: dstack
    currency: usd
    partitions:
      any: {weights: "CPU=0.05,GRES/gpu=2.0"}
    collect:
      dstack: {url: "$BURSAR_DEV_DSTACK_URL", token_file: "$demo/dstack.token", project: "$BURSAR_DEV_DSTACK_PROJECT", account: hpc}
      interval: 10s
    submit:
      default_partition: any
      partitions:
        any: {max_time: 1d, default_time: 1h}
EOF
umask 022
export BURSAR_CONFIG="$demo/bursar.yaml"
unset BURSAR_URL BURSAR_TOKEN BURSAR_DATABASE
[ -f "$demo/jwt.key" ] || "$bursar" token keygen --key-file "$demo/jwt.key"
run "$bursar" config check

step "allocations for this month, through the CLI (the same ledger the server uses)"
from=$(date -u +%Y-%m-01)
to=$(date -u -d "$from +1 month" +%Y-%m-%d)
run "$bursar" alloc set org --currency su --amount 1000 --from "$from" --to "$to"
run "$bursar" alloc set physics --currency su --amount 200 --from "$from" --to "$to"
run "$bursar" alloc set org --currency usd --amount 500.00 --from "$from" --to "$to"

step "starting bursar serve in the background (log: $demo/serve.log)"
(
  cd "$demo"
  BURSAR_LOG="${BURSAR_LOG:-info}" nohup "$bursar" serve </dev/null >>"$demo/serve.log" 2>&1 &
  echo $! >"$demo/serve.pid"
)
for _ in $(seq 100); do
  curl -sf "$url/healthz" >/dev/null 2>&1 && break
  [ -e "/proc/$(cat "$demo/serve.pid")" ] || { tail -n 30 "$demo/serve.log" >&2; die "bursar serve exited"; }
  sleep 0.2
done
curl -sf "$url/healthz" >/dev/null || { tail -n 30 "$demo/serve.log" >&2; die "bursar serve does not answer on $url"; }
echo "bursar serve (pid $(cat "$demo/serve.pid")) listening on $url"

step "a token for alice (bursar token issue), as an admin hands it over"
(umask 077; "$bursar" token issue --user alice --role user --ttl 7d >"$demo/alice.token")
(umask 077; "$bursar" token issue --user admin --role admin --ttl 7d >"$demo/admin.token")
echo "alice's token is in $demo/alice.token; an admin token in $demo/admin.token"

cat >"$demo/job.sh" <<'EOF'
#!/bin/bash
#SBATCH -A physics
#SBATCH -t 5
#SBATCH -n 2
#SBATCH -J hello
#SBATCH -D /tmp
#SBATCH -o /tmp/bursar-demo-%j.out
echo "hello from $(hostname) as $(whoami), account $SLURM_JOB_ACCOUNT"
sleep 5
EOF
cat >"$demo/task.dstack.yml" <<'EOF'
type: task
name: hello
commands:
  - echo hi
resources:
  cpu: 2
max_duration: 10m
EOF
chmod 644 "$demo/job.sh" "$demo/task.dstack.yml"

step "alice, on a login node: quote, submit, balance"
# As a user: no configuration, only the server's address and a token.
unset BURSAR_CONFIG
export BURSAR_URL="$url"
BURSAR_TOKEN=$(cat "$demo/alice.token")
export BURSAR_TOKEN
cd /tmp
run "$bursar" quote "$demo/job.sh" || true
run "$bursar" submit "$demo/job.sh" 2>&1 | tee "$demo/last-submit.txt"
job=$(awk '/^Submitted batch job/ {print $4}' "$demo/last-submit.txt")
id=$(sed -n 's/^bursar job \([0-9]*\):.*/\1/p' "$demo/last-submit.txt")
if [ -z "$job" ] || [ -z "$id" ]; then die "bursar submit printed no job ids (see above)"; fi
run "$bursar" balance --remote
run "$bursar" jobs

step "waiting for the job to finish and be settled (the server collects every 10 s)"
settled=0
for _ in $(seq 60); do
  if curl -sf -H "Authorization: Bearer $BURSAR_TOKEN" "$url/v1/jobs/$id" | grep -q '"state":"settled"'; then
    settled=1
    break
  fi
  sleep 2
done
run "$bursar" jobs --all
[ $settled = 1 ] || echo "(not settled yet: \`bursar jobs --all\` shows it once its final usage is collected)"
[ -z "$job" ] || [ ! -f "/tmp/bursar-demo-$job.out" ] || run cat "/tmp/bursar-demo-$job.out"
run "$bursar" balance --remote

cat <<EOF

==> bursar is running [${SECONDS}s]
  server:   $url (pid $(cat "$demo/serve.pid"), log $demo/serve.log, ledger $demo/bursar.db)
  as alice: export BURSAR_URL=$url BURSAR_TOKEN=\$(cat $demo/alice.token)
            bursar submit $demo/job.sh                        # bursar = $bursar
            bursar submit -M gpucloud $demo/task.dstack.yml   # a dstack run (fails here: no backends)
            bursar quote $demo/job.sh; bursar jobs --all; bursar balance
  as admin: BURSAR_CONFIG=$demo/bursar.yaml $bursar alloc list   (or the API with $demo/admin.token)
  stop:     kill \$(cat $demo/serve.pid)
            deploy/dev/stop.sh                   # the Slurm clusters and the dstack server
EOF
