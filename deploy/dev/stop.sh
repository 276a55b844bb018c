#!/usr/bin/env bash
# deploy/dev/stop.sh [--wipe [--keep-venv]] [dstack] [slurm] [next]
#
# Stops what slurm.sh and dstack.sh started — only those processes: each one by the pid
# in its pid file, and only when /proc/<pid>/cmdline still names the expected program.
# Reverse order of start: dstack server; then per Slurm cluster the queued jobs are
# cancelled (so no slurmstepd is orphaned), slurmrestd, slurmd, slurmctld; then
# slurmdbd, mariadbd, munged. SIGTERM first, SIGKILL after a grace period.
#
#   --wipe       afterwards delete the state: $BURSAR_DEV_DIR/{slurm,dstack,env.sh,...}
#                (accounting DB, dstack DB, keys, logs, job outputs, the dstack venv).
#                Debian packages, the Unix users and their homes stay.
#   --keep-venv  with --wipe: keep $BURSAR_DEV_DIR/dstack/venv (saves ~25 s next time)
#   dstack|slurm only that part (default: both, and next when slurm-next.sh has state)
#   next         the Slurm 24.11 chroot of slurm-next.sh (its --stop, or --wipe: the
#                debootstrapped root is kept; `slurm-next.sh --purge` deletes it)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
set -uo pipefail   # keep going: stop as much as possible even if one step fails

WIPE=0 KEEP_VENV=0 PARTS=()
for a in "$@"; do
  case $a in
    --wipe) WIPE=1 ;;
    --keep-venv) KEEP_VENV=1 ;;
    dstack | slurm | next) PARTS+=("$a") ;;
    -h | --help) sed -n '2,/^HERE=/{/^HERE=/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "unknown argument '$a' (try --help)" >&2; exit 2 ;;
  esac
done
if [ ${#PARTS[@]} -eq 0 ]; then
  PARTS=(dstack slurm)
  [ -d "$BURSAR_DEV_DIR/slurm-next" ] && PARTS+=(next)
fi
want() { [[ " ${PARTS[*]} " == *" $1 "* ]]; }

if want dstack; then
  D=$BURSAR_DEV_DIR/dstack
  if [ -e "$D/run/server.pid" ] && ! dev_claimed "$D"; then
    echo "  $D was not created by deploy/dev: not touching it"
  elif [ -e "$D/run/server.pid" ]; then
    log "dstack"
    # graceful shutdown takes ~5 s (its lifespan hook sleeps 3 s)
    dev_stop "dstack server" "$D/run/server.pid" "$D/venv/bin/dstack server" 20
  fi
fi

if want slurm; then
  S=$BURSAR_DEV_DIR/slurm RUN=$BURSAR_DEV_DIR/slurm/run
  if [ -d "$RUN" ] && ! dev_claimed "$S"; then
    echo "  $S was not created by deploy/dev: not touching it"
  elif [ -d "$RUN" ]; then
    log "slurm"
    for pf in "$RUN"/*-slurmctld.pid; do
      [ -e "$pf" ] || continue
      name=$(basename "$pf" -slurmctld.pid) conf=$S/etc/$name/slurm.conf
      dev_running "$pf" "/usr/sbin/slurmctld " || continue
      ids=$(SLURM_CONF=$conf timeout 10 squeue -h -o %A 2>/dev/null | sort -u | paste -sd' ' -)
      [ -n "$ids" ] || continue
      echo "  cancelling jobs on $name: $ids"
      # shellcheck disable=SC2086
      SLURM_CONF=$conf timeout 10 scancel $ids 2>/dev/null
      for _ in $(seq 50); do
        [ -z "$(SLURM_CONF=$conf timeout 5 squeue -h 2>/dev/null)" ] && break
        sleep 0.2
      done
    done
    for pf in "$RUN"/*-slurmrestd.pid; do [ -e "$pf" ] && dev_stop "$(basename "$pf" .pid)" "$pf" "/usr/sbin/slurmrestd "; done
    for pf in "$RUN"/*-slurmd-*.pid;   do [ -e "$pf" ] && dev_stop "$(basename "$pf" .pid)" "$pf" "/usr/sbin/slurmd "; done
    for pf in "$RUN"/*-slurmctld.pid;  do [ -e "$pf" ] && dev_stop "$(basename "$pf" .pid)" "$pf" "/usr/sbin/slurmctld "; done
    dev_stop slurmdbd "$RUN/slurmdbd.pid" "/usr/sbin/slurmdbd " 15
    dev_stop mariadbd "$RUN/mariadbd.pid" "/usr/sbin/mariadbd " 30
    dev_stop munged "$S/munge/munged.pid" "/usr/sbin/munged "
  fi
fi

# ---------------------------------------------------------------- next (slurm-next.sh)
# The Slurm 24.11 chroot stops itself: its jobs, its daemons (pid files in slurm-next/run,
# each checked to live in its chroot), then its chroot mounts. --wipe keeps the root.
if want next && [ -d "$BURSAR_DEV_DIR/slurm-next" ]; then
  if [ $WIPE = 1 ]; then "$HERE/slurm-next.sh" --wipe; else "$HERE/slurm-next.sh" --stop; fi
fi
# ---------------------------------------------------------------- end of next

if [ $WIPE = 1 ]; then
  [ -d "$BURSAR_DEV_DIR" ] || { log "nothing to wipe: no $BURSAR_DEV_DIR"; exit 0; }
  for part in "${PARTS[@]}"; do
    [ "$part" = next ] && continue   # wiped by slurm-next.sh above
    dir=$BURSAR_DEV_DIR/$part
    [ -d "$dir" ] || continue
    if ! dev_claimed "$dir"; then echo "  not wiping $dir: not created by deploy/dev"; continue; fi
    if [ "$part" = dstack ] && [ $KEEP_VENV = 1 ] && [ -d "$dir/venv" ]; then
      find "$dir" -mindepth 1 -maxdepth 1 ! -name venv ! -name .bursar-dev -exec rm -rf {} +
      echo "  wiped $dir (venv kept)"
    else
      rm -rf "${dir:?}"
      echo "  wiped $dir"
    fi
  done
  if want slurm && want dstack; then
    rm -rf "$BURSAR_DEV_DIR/env.sh" "$BURSAR_DEV_DIR/log" "$BURSAR_DEV_DIR/apt.log" "$BURSAR_DEV_DIR/.apt.lock"
    rmdir "$BURSAR_DEV_DIR" 2>/dev/null || true
  fi
fi
log "done"
