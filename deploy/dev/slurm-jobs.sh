#!/usr/bin/env bash
# deploy/dev/slurm-jobs.sh [--quick] — submit bursar's job mix to the dev clusters and
# wait until every job has left the queue and is final in accounting.
#
# As alice/bob/carol (runuser), so accounting holds jobs of several users and accounts:
#   onprem  ok-sleep, ok-2cpu, premium-4cpu (QOS premium), fail-exit1, cancel-running,
#           cancel-pending (--begin, cancelled before it is eligible), array (0-3%2, task 3
#           fails), steps (3 srun steps, the last fails), gpu1, het (2 components),
#           two-nodes, mem-hog (~200 MB for 12 s, so MaxRSS/TRESUsageIn* get values),
#           interactive (srun, no batch step), timeout (-t 1, runs into its limit)
#   cloud   cloud-gpu2 (2× h100), cloud-cpu, cloud-premium (--gpus=1), cloud-fail (exit 3)
#   plus two submissions that must be REJECTED (no association; unknown QOS).
#
# The timeout job is the slow one (~1.5 min: the limit is 1 minute and slurmctld checks
# limits every 30 s). BURSAR_DEV_TIMEOUT_JOB=0 or --quick leaves it out; it is submitted
# last on onprem so the other job ids do not depend on it.
#
# Output: $BURSAR_DEV_DIR/slurm/jobs/<run>/ (symlink jobs/latest) with jobs.tsv
# (cluster, name, user, account, job id, final state), submissions.log, start-time
# (for sacct -S) and the jobs' stdout files. Knobs: BURSAR_DEV_JOBS_WAIT (seconds, 300).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
dev_trap_errors
dev_require_root

TIMEOUT_JOB=${BURSAR_DEV_TIMEOUT_JOB:-1}
WAIT=${BURSAR_DEV_JOBS_WAIT:-300}
for a in "$@"; do
  case $a in
    --quick) TIMEOUT_JOB=0 ;;
    -h | --help) sed -n '2,/^HERE=/{/^HERE=/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown argument '$a' (try --help)" ;;
  esac
done
case $TIMEOUT_JOB in 0 | 1) ;; *) die "BURSAR_DEV_TIMEOUT_JOB must be 0 or 1, got '$TIMEOUT_JOB'" ;; esac

S=$BURSAR_DEV_DIR/slurm
[ -s "$S/env.sh" ] || die "$S/env.sh not found: start the stack with deploy/dev/slurm.sh first"
# shellcheck source=/dev/null
. "$S/env.sh"
ON=$BURSAR_DEV_ONPREM_CONF CL=$BURSAR_DEV_CLOUD_CONF
for conf in "$ON" "$CL"; do
  SLURM_CONF=$conf scontrol ping >/dev/null 2>&1 \
    || die "slurmctld for $conf does not answer: is the stack running? (deploy/dev/slurm.sh)"
done

RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
OUT=$S/jobs/$RUN_ID
dev_mkdir root:root 0755 "$S/jobs"
dev_mkdir root:root 1777 "$OUT"    # the users' jobs write their stdout here
ln -sfn "$RUN_ID" "$S/jobs/latest"
LOG=$OUT/submissions.log TSV=$OUT/jobs.tsv
: > "$LOG"; : > "$TSV"
date +%Y-%m-%dT%H:%M:%S > "$OUT/start-time"   # local time, the format sacct -S takes

# as USER CONF CMD — run CMD in USER's home with a clean environment; output to stdout + log
as() {
  local u=$1 conf=$2 cmd=$3
  printf '## %s @ %s: %s\n' "$u" "$(basename "$(dirname "$conf")")" "$cmd" >> "$LOG"
  runuser -u "$u" -- env -i HOME="/home/$u" PATH=/usr/bin:/bin USER="$u" LOGNAME="$u" SLURM_CONF="$conf" \
    bash -c "cd ~ && $cmd" 2>&1 | tee -a "$LOG"
}
cluster_of() { basename "$(dirname "$1")"; }
# submit CONF USER ACCOUNT NAME SBATCH-ARGS... — sbatch, record the id; prints the id
submit() {
  local conf=$1 u=$2 acct=$3 name=$4 out id; shift 4
  out=$(as "$u" "$conf" "sbatch --parsable -A $acct -J $name -o $OUT/%x-%j.out $*") || true
  id=${out##*$'\n'}; id=${id%%;*}
  [[ $id =~ ^[0-9]+$ ]] || die "sbatch of $name on $(cluster_of "$conf") as $u failed: $out" "$LOG"
  printf '%s\t%s\t%s\t%s\t%s\n' "$(cluster_of "$conf")" "$name" "$u" "$acct" "$id" >> "$TSV"
  echo "$id"
}
# reject CONF USER WHAT CMD — a submission that Slurm must refuse
reject() {
  if as "$2" "$1" "$4" >/dev/null; then warn "expected '$3' to be rejected, but it was accepted"
  else log "  rejected as expected: $3"; fi
}

log "submitting (run $RUN_ID, timeout job: $([ "$TIMEOUT_JOB" = 1 ] && echo yes || echo no))"
cat > "$OUT/steps.sbatch" <<'EOF'
#!/bin/bash
# three srun steps; the last one fails, so DerivedExitCode is 1 while ExitCode is 0
#SBATCH -n 2
#SBATCH --mem-per-cpu=500M
srun -n 2 hostname
srun -n 1 sleep 2
srun -n 1 false
echo done
EOF
cat > "$OUT/het.sbatch" <<'EOF'
#!/bin/bash
# heterogeneous job: two components, one per onprem node
#SBATCH -n 1 -c 1 --mem=500M
#SBATCH hetjob
#SBATCH -n 1 -c 2 --mem=1G
srun --het-group=0,1 hostname
EOF
chmod 0644 "$OUT"/*.sbatch

# ---------------------------------------------------------------- onprem
submit "$ON" alice physics   ok-sleep       --wrap "'sleep 2'" >/dev/null
submit "$ON" bob   chemistry ok-2cpu        -c 2 --mem=1G --wrap "'sleep 3'" >/dev/null
submit "$ON" alice physics   premium-4cpu   --qos=premium -c 4 --mem=2G --wrap "'sleep 3'" >/dev/null
submit "$ON" bob   chemistry fail-exit1     --wrap "'echo about to fail; exit 1'" >/dev/null
CANCEL_RUNNING=$(submit "$ON" alice physics cancel-running --wrap "'sleep 120'")
CANCEL_PENDING=$(submit "$ON" carol chemistry cancel-pending --begin=now+1hour --wrap "'sleep 1'")
submit "$ON" alice physics   array          --array=0-3%2 \
  --wrap "'sleep \$((SLURM_ARRAY_TASK_ID+1)); [ \$SLURM_ARRAY_TASK_ID -ne 3 ]'" >/dev/null
submit "$ON" carol physics   steps          "$OUT/steps.sbatch" >/dev/null
submit "$ON" alice physics   gpu1           --gres=gpu:1 --wrap "'echo CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES; sleep 2'" >/dev/null
submit "$ON" alice physics   het            "$OUT/het.sbatch" >/dev/null
submit "$ON" carol chemistry two-nodes      --qos=premium -N 2 --ntasks-per-node=2 --wrap "'srun hostname; sleep 2'" >/dev/null
submit "$ON" bob   chemistry mem-hog        --mem=1G \
  --wrap "'python3 -c \"import time; x = bytearray(200 * 1024 * 1024); time.sleep(12)\"'" >/dev/null
# interactive srun: a job with step 0 and no batch step
out=$(as bob "$ON" "srun -A chemistry -J interactive -n 1 bash -c 'echo job=\$SLURM_JOB_ID; sleep 1'") \
  || die "interactive srun failed: $out" "$LOG"
id=$(sed -n 's/^job=//p' <<<"$out")
printf 'onprem\tinteractive\tbob\tchemistry\t%s\n' "$id" >> "$TSV"
reject "$ON" bob   "bob on account physics (no association)" "sbatch -A physics --wrap 'sleep 1'"
reject "$ON" alice "alice with an unknown QOS"               "sbatch -A physics --qos=nonexistent --wrap 'sleep 1'"
if [ "$TIMEOUT_JOB" = 1 ]; then
  submit "$ON" bob chemistry timeout -t 1 --wrap "'sleep 300'" >/dev/null
fi

# ---------------------------------------------------------------- cloud
submit "$CL" alice physics   cloud-gpu2     --gres=gpu:h100:2 -c 4 --mem=4G --wrap "'sleep 3'" >/dev/null
submit "$CL" bob   chemistry cloud-cpu      -c 1 --wrap "'sleep 2'" >/dev/null
submit "$CL" carol chemistry cloud-premium  --qos=premium --gpus=1 --wrap "'sleep 2'" >/dev/null
submit "$CL" carol physics   cloud-fail     --wrap "'exit 3'" >/dev/null

# ---------------------------------------------------------------- cancellations
as carol "$ON" "scancel $CANCEL_PENDING" >/dev/null
for _ in $(seq 100); do
  [ "$(SLURM_CONF=$ON squeue -h -j "$CANCEL_RUNNING" -o %T 2>/dev/null)" = RUNNING ] && break
  sleep 0.2
done
sleep 2   # let it run a little, so it has a start time and an elapsed time
as alice "$ON" "scancel $CANCEL_RUNNING" >/dev/null
log "submitted $(wc -l < "$TSV") jobs; waiting for the queues to drain (up to $WAIT s)"

# ---------------------------------------------------------------- wait
# Only this run's jobs count (an array's tasks and a het job's components included): jobs
# someone else left in the queues must not hold this script up.
ours() { # ours CLUSTER CONF -> how many of this run's jobs on CLUSTER are still in its queue
  local q
  q=$(SLURM_CONF=$2 squeue -h -o %i) || { echo 1; return; }   # no answer: not drained
  awk -v c="$1" 'NR == FNR { if ($1 == c) id[$5] = 1; next }
    { j = $1; sub(/[_+].*/, "", j); if (j in id) n++ } END { print n + 0 }' FS='\t' "$TSV" FS=' ' - <<<"$q"
}
deadline=$(( SECONDS + WAIT )) next_report=$(( SECONDS + 15 ))
while :; do
  left=$(( $(ours onprem "$ON") + $(ours cloud "$CL") ))
  [ "$left" -eq 0 ] && break
  if [ $SECONDS -ge $deadline ]; then
    SLURM_CONF=$ON squeue >&2; SLURM_CONF=$CL squeue >&2
    die "$left job(s) still queued after $WAIT s (BURSAR_DEV_JOBS_WAIT)" "$S/log/onprem-slurmctld.log"
  fi
  if [ $SECONDS -ge $next_report ]; then log "  $left job(s) still in the queues"; next_report=$(( SECONDS + 15 )); fi
  sleep 1
done
# slurmctld sends job ends to slurmdbd asynchronously: wait until accounting agrees
for c in onprem cloud; do
  ids=$(awk -v c=$c '$1 == c { print $5 }' "$TSV" | paste -sd, -)
  for (( i = 0; ; i++ )); do
    open=$(sacct -M "$c" --allusers --duplicates -n -P -X -j "$ids" -o State 2>/dev/null \
      | grep -cE '^(PENDING|RUNNING|REQUEUED|RESIZING|SUSPENDED|COMPLETING)' || true)
    [ "$open" -eq 0 ] && break
    [ $i -lt 100 ] || die "accounting still shows $open unfinished job(s) on $c" "$S/log/slurmdbd.log"
    sleep 0.2
  done
done

# ---------------------------------------------------------------- report
states=$(for c in onprem cloud; do
  ids=$(awk -v c=$c '$1 == c { print $5 }' "$TSV" | paste -sd, -)
  sacct -M "$c" --allusers --duplicates -n -P -X -j "$ids" -o JobID,State | sed "s/^/$c|/"
done)
while IFS=$'\t' read -r c name u acct id; do
  st=$(awk -F'|' -v c="$c" -v id="$id" '$1 == c && ($2 == id || $2 ~ "^" id "[_+]") { print $3 }' <<<"$states" | sort -u | paste -sd/ -)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$name" "$u" "$acct" "$id" "${st:-?}"
done < "$TSV" > "$TSV.tmp" && mv "$TSV.tmp" "$TSV"
sed -i '1i cluster\tname\tuser\taccount\tjob_id\tstate' "$TSV"
log "all jobs finished in $(dev_elapsed) s"
awk -F'\t' '{ printf "  %-7s %-15s %-6s %-10s %-7s %s\n", $1, $2, $3, $4, $5, $6 }' "$TSV"
echo "  onprem ids: $(awk -F'\t' '$1 == "onprem" { printf "%s ", $5 }' "$TSV")"
echo "  cloud ids:  $(awk -F'\t' '$1 == "cloud" { printf "%s ", $5 }' "$TSV")"
echo "  table: $TSV   since: sacct -M onprem,cloud --allusers --duplicates -S $(cat "$OUT/start-time")"
