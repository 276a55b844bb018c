#!/usr/bin/env bash
# deploy/dev/up.sh [--no-dstack] [--no-slurm] [--no-next] [--serial] — start the whole dev stack.
#
# Runs slurm.sh, then slurm-next.sh (a third Slurm cluster, `next`, on Slurm 24.11 in a Debian
# 13 chroot), and beside them dstack.sh (their slow parts, apt, debootstrap and pip, overlap;
# --serial runs one after the other), prints each one's output and time, and writes
# $BURSAR_DEV_DIR/env.sh, which sources the env.sh of each part that is up:
#
#   . /var/tmp/bursar-dev/env.sh
#
# Idempotent like the scripts it runs. Needs root (slurm.sh does). Stop: stop.sh.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
dev_trap_errors

SLURM=1 NEXT=1 DSTACK=1 SERIAL=0
T_slurm=- RC_slurm=0 T_next=- RC_next=0 T_dstack=- RC_dstack=0
for a in "$@"; do
  case $a in
    --no-dstack) DSTACK=0 ;;
    --no-slurm) SLURM=0 ;;
    --no-next) NEXT=0 ;;
    --serial) SERIAL=1 ;;
    -h | --help) sed -n '2,/^HERE=/{/^HERE=/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown argument '$a' (try --help)" ;;
  esac
done
[ $SLURM = 1 ] || [ $NEXT = 1 ] && dev_require_root
mkdir -p "$BURSAR_DEV_DIR/log"

# run_part NAME [SCRIPT] — run SCRIPT.sh (default NAME.sh); sets T_<NAME> (seconds) and RC_<NAME>
run_part() {
  local t0=${EPOCHREALTIME/./} rc=0
  "$HERE/${2:-$1}.sh" || rc=$?
  printf -v "T_$1" '%s' "$(dev_elapsed "$t0")"
  printf -v "RC_$1" '%s' "$rc"
}
# the Slurm parts one after the other: both add the same Unix users
run_slurm_parts() {
  [ $SLURM = 1 ] && run_part slurm
  [ $NEXT = 1 ] && run_part next slurm-next
  return 0
}
DLOG=$BURSAR_DEV_DIR/log/up-dstack.log
if [ $DSTACK = 1 ] && { [ $SLURM = 1 ] || [ $NEXT = 1 ]; } && [ $SERIAL = 0 ]; then
  # dstack in the background (its output is printed once slurm is up), slurm in front
  log "starting slurm and dstack in parallel (dstack output: $DLOG)"
  ( run_part dstack; echo "$T_dstack $RC_dstack" > "$DLOG.result" ) > "$DLOG" 2>&1 &
  bg=$!
  run_slurm_parts
  wait "$bg" || true
  cat "$DLOG"
  read -r T_dstack RC_dstack < "$DLOG.result" || { T_dstack="?" RC_dstack=1; }
  rm -f "$DLOG.result"
else
  run_slurm_parts
  [ $DSTACK = 1 ] && run_part dstack
fi

# one env file for tests, sourcing the parts that are up
{
  echo "# written by deploy/dev/up.sh — source it:  . $BURSAR_DEV_DIR/env.sh"
  for part in slurm slurm-next dstack; do
    f=$BURSAR_DEV_DIR/$part/env.sh
    echo "[ -r $f ] && . $f"
  done
  echo "true"
} | dev_install_file "$BURSAR_DEV_DIR/env.sh" 0644 root:root || true

echo
log "timings:"
[ $SLURM = 1 ] && printf '  slurm.sh   %6s s  %s\n' "$T_slurm" "$([ "$RC_slurm" = 0 ] && echo ok || echo "FAILED (exit $RC_slurm)")"
[ $NEXT = 1 ] && printf '  slurm-next.sh %3s s  %s\n' "$T_next" "$([ "$RC_next" = 0 ] && echo ok || echo "FAILED (exit $RC_next)")"
[ $DSTACK = 1 ] && printf '  dstack.sh  %6s s  %s\n' "$T_dstack" "$([ "$RC_dstack" = 0 ] && echo ok || echo "FAILED (exit $RC_dstack, see above)")"
printf '  up.sh      %6s s  total%s\n' "$(dev_elapsed)" "$([ $SERIAL = 0 ] && [ $SLURM = 1 ] && [ $DSTACK = 1 ] && echo ', parts in parallel')"
[ "${RC_slurm:-0}" = 0 ] && [ "${RC_next:-0}" = 0 ] && [ "${RC_dstack:-0}" = 0 ] || exit 1
echo "  env: . $BURSAR_DEV_DIR/env.sh     jobs: deploy/dev/slurm-jobs.sh [--quick]     check: deploy/dev/check.sh     stop: deploy/dev/stop.sh [--wipe]"
