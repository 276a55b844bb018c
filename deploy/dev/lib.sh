# deploy/dev/lib.sh — helpers shared by the dev stack scripts (sourced, not run).
#
# Conventions every script follows:
#   * all state lives under $BURSAR_DEV_DIR (default /var/tmp/bursar-dev);
#   * every daemon we start has a pid file under <component>/run/, and stop.sh stops
#     exactly those PIDs (after checking /proc/<pid>/cmdline still names the program);
#   * every port is "default + $BURSAR_DEV_PORT_OFFSET", so a second stack (say a CI
#     run next to a developer's stack) only needs another BURSAR_DEV_DIR and offset;
#   * a failing step stops the script with a message and the tail of the log that
#     explains it.
# shellcheck shell=bash

BURSAR_DEV_DIR=${BURSAR_DEV_DIR:-/var/tmp/bursar-dev}
# Absolute (daemons start from /, dev_spawn) and canonical (no `//`, `..` or symlinks), so it
# compares equal to what /proc/<pid>/root and /proc/self/mountinfo say.
BURSAR_DEV_DIR=$(realpath -m -- "$BURSAR_DEV_DIR")
BURSAR_DEV_PORT_OFFSET=${BURSAR_DEV_PORT_OFFSET:-0}
case $BURSAR_DEV_PORT_OFFSET in
  '' | *[!0-9]*) echo "BURSAR_DEV_PORT_OFFSET must be a non-negative integer, got '$BURSAR_DEV_PORT_OFFSET'" >&2; exit 2 ;;
esac
export BURSAR_DEV_DIR BURSAR_DEV_PORT_OFFSET
export DEBIAN_FRONTEND=noninteractive

DEV_SCRIPT=$(basename "$0" .sh)
DEV_T0=${EPOCHREALTIME/./}

# seconds since the script started, one decimal
dev_elapsed() {
  local us=$(( ${EPOCHREALTIME/./} - ${1:-$DEV_T0} ))
  printf '%d.%d' $(( us / 1000000 )) $(( us / 100000 % 10 ))
}
log() { printf '[%s %6ss] %s\n' "$DEV_SCRIPT" "$(dev_elapsed)" "$*"; }
warn() { printf '[%s %6ss] WARNING: %s\n' "$DEV_SCRIPT" "$(dev_elapsed)" "$*" >&2; }

# die MESSAGE [LOGFILE...] — print the message and the last lines of each log, exit 1
die() {
  local msg=$1 f; shift
  trap - ERR
  printf '\n[%s] ERROR: %s\n' "$DEV_SCRIPT" "$msg" >&2
  for f in "$@"; do
    [ -s "$f" ] || continue
    printf -- '---- last lines of %s ----\n' "$f" >&2
    tail -n "${DEV_LOG_TAIL:-25}" "$f" >&2
    printf -- '----\n' >&2
  done
  exit 1
}

# Any command failing under `set -e` lands here: say which one, and show the log of
# the step in progress ($DEV_STEP_LOG, set by scripts around long steps).
dev_on_err() {
  local rc=$1 line=$2 cmd=$3
  die "'$cmd' failed (exit $rc) at $DEV_SCRIPT.sh line $line${DEV_STEP:+, during: $DEV_STEP}" ${DEV_STEP_LOG:-}
}
dev_trap_errors() { set -Eeuo pipefail; trap 'dev_on_err $? $LINENO "$BASH_COMMAND"' ERR; }

dev_require_root() {
  [ "$(id -u)" = 0 ] || die "$DEV_SCRIPT.sh must run as root (it installs packages, creates users and starts root daemons)"
}

# ---------------------------------------------------------------- packages
# dev_apt_install PKG... — install what is missing, --no-install-recommends.
# `apt-get update` runs at most once, and only when the lists are older than a day or
# the install fails on stale lists. An flock serialises slurm.sh and dstack.sh when
# up.sh runs them side by side.
dev_apt_install() {
  local missing=() p log=$BURSAR_DEV_DIR/apt.log
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "packages missing (${missing[*]}) and not root: install them or run as root"
  mkdir -p "$BURSAR_DEV_DIR"
  log "apt: installing ${missing[*]}"
  (
    flock 9
    # maintainer scripts must not try to start daemons (no init system here);
    # policy-rc.d exit 101 = "not allowed". Only ours if there was none.
    made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1
    fi
    trap 'if [ $made_policy = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi' EXIT
    apt_get() { apt-get -o DPkg::Lock::Timeout=300 -y -q "$@" >>"$log" 2>&1; }
    updated=0
    if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
      apt_get update || exit 10
      updated=1
    fi
    if ! apt_get install --no-install-recommends "${missing[@]}"; then
      [ $updated = 1 ] && exit 11
      apt_get update || exit 10
      apt_get install --no-install-recommends "${missing[@]}" || exit 11
    fi
  ) 9>"$BURSAR_DEV_DIR/.apt.lock" || die "apt-get failed installing: ${missing[*]}" "$log"
}

# ---------------------------------------------------------------- processes
# dev_pid PIDFILE — the pid recorded in PIDFILE, if any
dev_pid() { local p; [ -s "$1" ] && read -r p < "$1" && [[ $p =~ ^[0-9]+$ ]] && echo "$p"; }

# dev_running PIDFILE MATCH — true when the recorded pid is alive AND its command line
# contains MATCH (a recycled pid that now belongs to something else does not count)
dev_running() {
  local pid cmd
  pid=$(dev_pid "$1") || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$2"* ]]
}

# dev_spawn PIDFILE LOGFILE CMD... — start a foreground (-D style) daemon in its own
# session, detached from our stdio, and record its pid. setsid does not fork here (we
# are not a process-group leader), and setpriv execs in place, so $! is the daemon.
dev_spawn() {
  local pf=$1 lf=$2; shift 2
  # From /: a daemon must not keep the caller's directory (a checkout that may be deleted
  # while the stack runs: slurmrestd then fails getcwd on job submission and exits).
  (cd / && exec setsid "$@" </dev/null >>"$lf" 2>&1) &
  echo $! > "$pf"
}

# dev_wait SECONDS WHAT LOGFILE CMD... — poll CMD every 0.2 s; on timeout die with the log
dev_wait() {
  local secs=$1 what=$2 lf=$3 deadline=$(( ${EPOCHREALTIME/./} + $1 * 1000000 )); shift 3
  until "$@" >/dev/null 2>&1; do
    [ "${EPOCHREALTIME/./}" -lt "$deadline" ] || die "timed out after $secs s waiting for $what" "$lf"
    sleep 0.2
  done
}

# dev_alive PID — the process exists and is not a zombie. Our daemons are reparented to
# PID 1 once the starting script exits; an exited one stays a zombie until PID 1 reaps it.
dev_alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# dev_stop NAME PIDFILE MATCH [SECONDS] — SIGTERM the recorded pid, SIGKILL after SECONDS
dev_stop() {
  local name=$1 pf=$2 match=$3 secs=${4:-10} pid i t0=${EPOCHREALTIME/./}
  [ -e "$pf" ] || return 0
  if ! dev_running "$pf" "$match"; then
    rm -f "$pf"; return 0
  fi
  pid=$(dev_pid "$pf")
  kill -TERM "$pid" 2>/dev/null || true
  for (( i = 0; i < secs * 10; i++ )); do
    dev_alive "$pid" || break
    sleep 0.1
  done
  if dev_alive "$pid"; then
    echo "  $name ($pid) ignored SIGTERM for ${secs}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  echo "  stopped $name (pid $pid) in $(dev_elapsed "$t0") s"
  rm -f "$pf"
}

# dev_port_user PORT — "pid/program" of whatever listens on TCP PORT (empty when free)
dev_port_user() {
  local line
  line=$(ss -Htlnp "sport = :$1" 2>/dev/null | head -1)
  [ -n "$line" ] || return 0
  sed -n 's/.*users:(("\([^"]*\)",pid=\([0-9]*\).*/\2\/\1/p' <<<"$line" | grep . || echo "?/unknown program"
}
# dev_port_free PORT WHAT — die when something already listens on PORT
dev_port_free() {
  local who
  who=$(dev_port_user "$1")
  [ -z "$who" ] && return 0
  die "port $1 ($2) is already in use by pid ${who%%/*} (${who#*/}), which these scripts did not start.
  Stop it, or run a second stack beside it with another BURSAR_DEV_DIR and BURSAR_DEV_PORT_OFFSET (e.g. 2000: the next cluster already uses + 1000)."
}

# dev_install_file DEST MODE OWNER — write stdin to DEST when the content differs;
# returns 0 when the file changed, 1 when it was already up to date
dev_install_file() {
  local dest=$1 mode=$2 owner=$3 tmp
  tmp=$(mktemp "$dest.XXXXXX")
  cat > "$tmp"
  if [ -f "$dest" ] && cmp -s "$tmp" "$dest"; then
    rm -f "$tmp"; chmod "$mode" "$dest"; chown "$owner" "$dest"; return 1
  fi
  chmod "$mode" "$tmp"; chown "$owner" "$tmp"; mv -f "$tmp" "$dest"
  return 0
}

# dev_mkdir OWNER MODE DIR...
dev_mkdir() { local o=$1 m=$2; shift 2; mkdir -p "$@"; chown "$o" "$@"; chmod "$m" "$@"; }

# dev_claim DIR — mark DIR as managed by these scripts. A non-empty DIR without the mark
# (e.g. the reference recipe's state, which uses the same default path) is refused, so
# we never adopt, restart or stop daemons we did not start.
dev_claim() {
  local dir=$1 mark=$1/.bursar-dev
  if [ -d "$dir" ] && [ ! -e "$mark" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    die "$dir exists but was not created by deploy/dev (no $mark): leave it alone and
  use another BURSAR_DEV_DIR (and BURSAR_DEV_PORT_OFFSET if its daemons are running)"
  fi
  mkdir -p "$dir"
  [ -e "$mark" ] || echo "managed by deploy/dev/$DEV_SCRIPT.sh; remove with deploy/dev/stop.sh --wipe" > "$mark"
}
# dev_claimed DIR — true when DIR carries our mark
dev_claimed() { [ -e "$1/.bursar-dev" ]; }

# ---------------------------------------------------------------- Slurm configuration text
# The parts slurm.sh (22.05) and slurm-next.sh (24.11) write alike; each script writes its
# own header, cluster, paths and nodes around them.

# dev_acct_db_sql PASSWORD — the SQL that gives slurmdbd its accounting database
dev_acct_db_sql() {
  cat <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$1';
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$1';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$1';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL
}

# dev_slurmdbd_conf MUNGE_SOCK JWT_KEY DBD_PORT LOG_DIR RUN_DIR MYSQL_PORT DB_PASS — slurmdbd.conf
dev_slurmdbd_conf() {
  cat <<EOF
AuthType=auth/munge
AuthInfo=socket=$1
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$2
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$3
SlurmUser=slurm
DebugLevel=info
LogFile=$4/slurmdbd.log
PidFile=$5/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$6
StorageUser=slurm
StoragePass=$7
StorageLoc=slurm_acct_db
PurgeEventAfter=0
EOF
}

# dev_slurm_conf_auth MUNGE_SOCK JWT_KEY — slurm.conf's users and authentication
dev_slurm_conf_auth() {
  cat <<EOF
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$1
# clients and slurmctld reach slurmdbd's munge through AccountingStoragePass, not AuthInfo
AccountingStoragePass=$1
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$2
EOF
}

# dev_slurm_conf_common DBD_PORT ACCOUNTED_TRES — slurm.conf's plugins, scheduling and accounting
dev_slurm_conf_common() {
  cat <<EOF
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups, no systemd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=5
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without a default a job with no --mem takes the whole node and jobs run one at a time
DefMemPerCPU=1000
PriorityType=priority/multifactor
PriorityWeightFairshare=1000
MailProg=/bin/true
ReturnToService=2
MinJobAge=30
KillWait=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$1
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=$2
JobCompType=jobcomp/none
GresTypes=gpu
# fake hardware: 8 CPUs / 16 GB per node on a 2-core box; the declared sizes win
SlurmdParameters=config_overrides
EOF
}
