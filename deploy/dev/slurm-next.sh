#!/usr/bin/env bash
# deploy/dev/slurm-next.sh [--stop | --wipe | --purge] — a newer real Slurm (Debian 13
# trixie, slurm-wlm 24.11, OpenAPI v0.0.40/41/42) beside slurm.sh's 22.05 clusters.
#
#   chroot $BURSAR_DEV_DIR/slurm-next/root (debootstrap --variant=minbase trixie):
#     munged ─ mariadbd (127.0.0.1:4307) ─ slurmdbd ─ cluster "next": slurmctld,
#     slurmd nx-n1 + nx-n2, slurmrestd (auth/jwt, 127.0.0.1:7820)
#
# Every port is slurm.sh's + 1000 (+ $BURSAR_DEV_PORT_OFFSET), so both stacks run side by
# side. The daemons run inside the chroot in the foreground (-D), each in its own session;
# the chroot shares the host's network, users' uids and hostname. The state lives outside
# the chroot, in run/, log/ and var/ under $BURSAR_DEV_DIR/slurm-next, and is bind-mounted
# into the chroot at the SAME path, so every path (slurm.conf, JWT key, pid files, logs)
# is valid inside and outside. Pid files: run/*.pid; a process counts as ours only when
# its command line matches AND its root directory is our chroot.
#
# Idempotent: a second run repairs (mounts, starts what is not running), rewrites configs
# only when they differ and skips the accounting setup when sacctmgr shows it unchanged.
# When it succeeds it writes $BURSAR_DEV_DIR/slurm-next/env.sh and bin/next-slurm.
#
#   --stop   cancel the queued jobs, stop our daemons (by pid), unmount the chroot mounts
#   --wipe   --stop, then delete the state (run/ log/ var/ bin/ env.sh); the debootstrapped
#            root with its packages is kept as a cache (the next start takes ~10 s)
#   --purge  --wipe and delete the root too
#
# Needs root (debootstrap, chroot, mount, mknod, root slurmd). Host: Debian 12 with
# debootstrap (installed if missing); network access to deb.debian.org for the first run.
# Knobs: BURSAR_DEV_DIR (/var/tmp/bursar-dev), BURSAR_DEV_PORT_OFFSET (0),
#        BURSAR_NEXT_MIRROR (http://deb.debian.org/debian), BURSAR_NEXT_SUITE (trixie).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

MODE=up
case ${1:-} in
  '') ;;
  --stop) MODE=stop ;;
  --wipe) MODE=wipe ;;
  --purge) MODE=purge ;;
  -h | --help) sed -n '2,/^HERE=/{/^HERE=/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  *) echo "unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "one argument at most (try --help)" >&2; exit 2; }

D=$BURSAR_DEV_DIR/slurm-next
ROOT=$D/root
RUN=$D/run LOGD=$D/log VAR=$D/var BIN=$D/bin
ETC=$VAR/etc STATE=$VAR/state SECRETS=$VAR/secrets
MUNGE_DIR=$VAR/munge MUNGE_SOCK=$VAR/munge/munge.socket.2
MYSQL_DIR=$VAR/mysql MYSQL_SOCK=$VAR/mysql/mysqld.sock
CONF=$ETC/slurm.conf
JWT_KEY=$SECRETS/jwt_hs256.key
DB_PASS_FILE=$SECRETS/slurmdbd.dbpass
SUITE=${BURSAR_NEXT_SUITE:-trixie}
MIRROR=${BURSAR_NEXT_MIRROR:-http://deb.debian.org/debian}
NOFF=$((BURSAR_DEV_PORT_OFFSET + 1000))   # slurm.sh's ports + 1000
MYSQL_PORT=$((3307 + NOFF))
CTLD_PORT=$((6817 + NOFF))
SLURMD_PORT=$((6818 + NOFF))   # node i listens on SLURMD_PORT + 100*(i-1), as in slurm.sh
DBD_PORT=$((6819 + NOFF))
REST_PORT=$((6820 + NOFF))
CLUSTER=next PART=batch PREFIX=nx-n NODES=2
SMT_PART=smt SMT_NODE=nx-t1                      # as slurm.sh's onprem: two threads per core
PART_MAXTIME=INFINITE                            # as slurm.sh's partitions
WEIGHTS=CPU=1.0,Mem=0.25G,GRES/gpu=4.0,License/matlab=2.0   # slurm.sh's onprem
LICENSES=matlab:4                                # slurm.sh's onprem
FEATURES=skylake,ib
HOST=$(hostname -s)
USERS=(alice bob carol)
# the chroot's programs see a clean environment (not the caller's PATH, locale, SLURM_CONF)
CHROOT_ENV=(/usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  LANG=C.UTF-8 HOME=/root TZ=UTC SLURM_CONF="$CONF")
DEBS=(munge mariadb-server slurmdbd slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin)

step() { DEV_STEP=$1; DEV_STEP_LOG=${2:-}; log "$1"; }
nodes() { # "node port" lines, the smt node last
  local i; for (( i = 1; i <= NODES; i++ )); do echo "$PREFIX$i $(( SLURMD_PORT + 100 * (i - 1) ))"; done
  echo "$SMT_NODE $(( SLURMD_PORT + 100 * NODES ))"
}
# inch CMD... — run CMD inside the chroot as root, clean environment
inch() { chroot "$ROOT" "${CHROOT_ENV[@]}" "$@"; }
# inch_spawn PIDFILE LOGFILE [VAR=value...] CMD... — dev_spawn inside the chroot; chroot and
# env exec in place, so the recorded pid is the daemon's
inch_spawn() { local pf=$1 lf=$2; shift 2; dev_spawn "$pf" "$lf" chroot "$ROOT" "${CHROOT_ENV[@]}" "$@"; }

# nx_running PIDFILE MATCH — dev_running, and the process lives in OUR chroot (the host's
# slurm.sh daemons have the same program names)
nx_running() {
  dev_running "$1" "$2" || return 1
  [ "/proc/$(dev_pid "$1")/root" -ef "$ROOT" ]
}
# nx_stop NAME PIDFILE MATCH [SECONDS] — dev_stop for a process of our chroot
nx_stop() {
  [ -e "$2" ] || return 0
  if ! nx_running "$2" "$3"; then rm -f "$2"; return 0; fi
  dev_stop "$@"
}
# pids of every process whose root is our chroot (daemons, slurmstepd, job processes)
chroot_pids() {
  local p
  for p in /proc/[0-9]*; do
    [ "$p/root" -ef "$ROOT" ] && echo "${p#/proc/}"
  done
  return 0
}
# mounts_under DIR — mount points at or under DIR, most recent first
mounts_under() { awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | tac; }
our_mounts() { mounts_under "$ROOT"; }

# ================================================================ --stop / --wipe / --purge
nx_stop_all() {
  if [ -d "$D" ] && ! dev_claimed "$D"; then echo "  $D was not created by deploy/dev: not touching it"; return 1; fi
  [ -d "$RUN" ] || [ -n "$(our_mounts)" ] || return 0
  log "slurm-next: stopping"
  if nx_running "$RUN/slurmctld.pid" "/usr/sbin/slurmctld -D -f $CONF"; then
    ids=$(inch timeout 10 squeue -h -o %A 2>/dev/null | sort -u | paste -sd' ' -)
    if [ -n "$ids" ]; then
      echo "  cancelling jobs on $CLUSTER: $ids"
      # shellcheck disable=SC2086
      inch timeout 10 scancel $ids 2>/dev/null
      for _ in $(seq 50); do
        [ -z "$(inch timeout 5 squeue -h 2>/dev/null)" ] && break
        sleep 0.2
      done
    fi
  fi
  nx_stop slurmrestd "$RUN/slurmrestd.pid" "/usr/sbin/slurmrestd "
  for pf in "$RUN"/slurmd-*.pid; do [ -e "$pf" ] && nx_stop "$(basename "$pf" .pid)" "$pf" "/usr/sbin/slurmd -D -f $CONF"; done
  nx_stop slurmctld "$RUN/slurmctld.pid" "/usr/sbin/slurmctld -D -f $CONF"
  nx_stop slurmdbd "$RUN/slurmdbd.pid" "/usr/sbin/slurmdbd -D" 15
  nx_stop mariadbd "$RUN/mariadbd.pid" "/usr/sbin/mariadbd " 30
  nx_stop munged "$RUN/munged.pid" "/usr/sbin/munged "
  # whatever still runs in the chroot descends from our daemons (a slurmstepd or job
  # process left by an unclean end): it would keep the mounts busy
  local left p
  left=$(chroot_pids | paste -sd' ' -)
  if [ -n "$left" ]; then
    echo "  processes left in the chroot: $left — SIGTERM, then SIGKILL after 5 s"
    for p in $left; do echo "    $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)"; done
    # shellcheck disable=SC2086
    kill -TERM $left 2>/dev/null
    for _ in $(seq 50); do [ -z "$(chroot_pids)" ] && break; sleep 0.1; done
    left=$(chroot_pids | paste -sd' ' -)
    # shellcheck disable=SC2086
    [ -z "$left" ] || kill -KILL $left 2>/dev/null
    sleep 0.2
  fi
  local m
  while read -r m; do
    [ -n "$m" ] || continue
    umount "$m" 2>/dev/null || { echo "  $m busy: lazy unmount"; umount -l "$m"; }
    echo "  unmounted $m"
  done < <(our_mounts)
  return 0
}

if [ "$MODE" != up ]; then
  set -uo pipefail   # keep going: stop as much as possible
  [ "$(id -u)" = 0 ] || { echo "slurm-next.sh $1 must run as root" >&2; exit 1; }
  nx_stop_all || exit 1
  if [ "$MODE" = wipe ] || [ "$MODE" = purge ]; then
    [ -d "$D" ] || { log "nothing to wipe: no $D"; exit 0; }
    # never delete with a mount left under the root: a bind of /dev would take the host's /dev with it
    if [ -n "$(mounts_under "$D")" ]; then echo "  mounts left under $D: not wiping" >&2; mounts_under "$D" >&2; exit 1; fi
    rm -rf --one-file-system "$RUN" "$LOGD" "$VAR" "$BIN" "$D/env.sh" "$D/root.partial"
    if [ "$MODE" = purge ]; then rm -rf --one-file-system "$ROOT"; rm -f "$D/.bursar-dev"; rmdir "$D" 2>/dev/null; echo "  wiped $D"
    else echo "  wiped the state of $D (kept the debootstrapped root: --purge deletes it)"; fi
  fi
  log "done"
  exit 0
fi

dev_trap_errors
dev_require_root
dev_claim "$D"
dev_mkdir root:root 0755 "$D" "$RUN" "$VAR" "$BIN"
dev_mkdir root:root 1777 "$LOGD"   # daemons running as root, slurm and slurmrestd log here

# ================================================================ 1. chroot (debootstrap)
step "host packages"
dev_apt_install debootstrap curl python3 iproute2 util-linux
T_HOSTPKG=$(dev_elapsed)

step "debootstrap $SUITE" "$LOGD/debootstrap.log"
if [ ! -e "$ROOT/.bursar-debootstrap-ok" ]; then
  [ -z "$(our_mounts)$(mounts_under "$D/root.partial")" ] \
    || die "$ROOT is incomplete but has mounts: unmount them ($(our_mounts; mounts_under "$D/root.partial"))"
  rm -rf --one-file-system "$D/root.partial" "$ROOT"
  log "  debootstrap --variant=minbase $SUITE from $MIRROR (about a minute)"
  debootstrap --variant=minbase "$SUITE" "$D/root.partial" "$MIRROR" > "$LOGD/debootstrap.log" 2>&1 \
    || die "debootstrap failed" "$LOGD/debootstrap.log" "$D/root.partial/debootstrap/debootstrap.log"
  mv "$D/root.partial" "$ROOT"
  date -u +%FT%TZ > "$ROOT/.bursar-debootstrap-ok"
fi
T_DEBOOTSTRAP=$(dev_elapsed)

step "chroot mounts"
# mount_once TARGET MOUNT-ARGS... — mount unless TARGET already is a mount point
mount_once() { local t=$1; shift; mkdir -p "$t"; mountpoint -q "$t" || mount "$@" "$t"; }
mount_once "$ROOT/proc" -t proc proc
mount_once "$ROOT/sys" -t sysfs sysfs            # a fresh sysfs: no cgroup mounts inside
# /dev is a small tmpfs of its own, never a bind of the host's: a careless `rm -rf` of the dev
# folder while the chroot is up must not reach the host's device nodes.
mount_once "$ROOT/dev" -t tmpfs -o mode=0755,nosuid,size=1m bursar-next-dev
while read -r name major minor; do
  [ -c "$ROOT/dev/$name" ] || mknod -m 0666 "$ROOT/dev/$name" c "$major" "$minor"
done <<'NODES'
null 1 3
zero 1 5
full 1 7
random 1 8
urandom 1 9
tty 5 0
NODES
mkdir -p "$ROOT/dev/pts" "$ROOT/dev/shm"; chmod 1777 "$ROOT/dev/shm"
while read -r name target; do
  [ -e "$ROOT/dev/$name" ] || [ -L "$ROOT/dev/$name" ] || ln -s "$target" "$ROOT/dev/$name"
done <<'LINKS'
ptmx pts/ptmx
fd /proc/self/fd
stdin /proc/self/fd/0
stdout /proc/self/fd/1
stderr /proc/self/fd/2
LINKS
mount_once "$ROOT/dev/pts" -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts
for d in "$RUN" "$LOGD" "$VAR"; do mount_once "$ROOT$d" --bind "$d"; done   # same path inside
# names and addresses as on the host (NodeHostname=$HOST), DNS for apt
cmp -s /etc/hosts "$ROOT/etc/hosts" || cp /etc/hosts "$ROOT/etc/hosts"
cmp -s /etc/resolv.conf "$ROOT/etc/resolv.conf" || cp /etc/resolv.conf "$ROOT/etc/resolv.conf"

step "chroot packages" "$LOGD/apt.log"
# maintainer scripts must not start daemons: no init system in the chroot (for good)
printf '#!/bin/sh\nexit 101\n' | dev_install_file "$ROOT/usr/sbin/policy-rc.d" 0755 root:root || true
# debootstrap leaves fresh lists of "$SUITE main" only: update once the -updates and -security
# lines are added (the installed Slurm then has its security fixes)
SOURCES_CHANGED=0
dev_install_file "$ROOT/etc/apt/sources.list" 0644 root:root <<EOF && SOURCES_CHANGED=1 || true
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
EOF
missing=()
for p in "${DEBS[@]}"; do inch dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "  apt (chroot): ${missing[*]}"
  inch_apt() { inch env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -y -q "$@" >> "$LOGD/apt.log" 2>&1; }
  if [ $SOURCES_CHANGED = 1 ] || [ -z "$(find "$ROOT/var/lib/apt/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
    inch_apt update || die "apt-get update failed in the chroot" "$LOGD/apt.log"
  fi
  inch_apt install --no-install-recommends "${missing[@]}" \
    || { inch_apt update && inch_apt install --no-install-recommends "${missing[@]}"; } \
    || die "apt-get install failed in the chroot" "$LOGD/apt.log"
fi
# auth_jwt.so / rest_auth_jwt.so come from slurm-wlm-jwt-plugin (only a Recommends, as on 22.05)
ls "$ROOT"/usr/lib/*/slurm-wlm/auth_jwt.so >/dev/null 2>&1 || die "auth_jwt.so missing in the chroot"
SLURM_VERSION=$(inch dpkg-query -W -f='${Version}' slurmctld)
T_CHROOTPKG=$(dev_elapsed)

# ================================================================ 2. users, directories
step "users and directories"
# on the host as slurm.sh creates them; in the chroot with the host's uid/gid, so that
# job files, tokens and accounting mean the same user on both sides
for u in "${USERS[@]}"; do
  if ! id "$u" >/dev/null 2>&1; then useradd -m -s /bin/bash "$u" || id "$u" >/dev/null 2>&1; fi
  uid=$(id -u "$u") gid=$(id -g "$u") grp=$(id -gn "$u")
  if cur=$(inch getent passwd "$u"); then
    IFS=: read -r _ _ cuid cgid _ <<<"$cur"
    [ "$cuid:$cgid" = "$uid:$gid" ] || die "user $u is $cuid:$cgid in the chroot but $uid:$gid on the host (run --purge)"
  else
    inch getent group "$grp" >/dev/null || inch groupadd -g "$gid" "$grp"
    inch useradd -m -u "$uid" -g "$gid" -s /bin/bash "$u"
  fi
done
# slurmrestd refuses to run as root or SlurmUser: an unprivileged user (chroot only)
inch id slurmrestd >/dev/null 2>&1 || inch useradd -r -M -d /nonexistent -s /usr/sbin/nologin slurmrestd
# owners are numeric from the host's side: the chroot's munge/mysql uids are not the host's
cid() { echo "$(inch id -u "$1"):$(inch id -g "$1")"; }
SLURM_ID=$(cid slurm) MUNGE_ID=$(cid munge) MYSQL_ID=$(cid mysql)
dev_mkdir root:root 0755 "$ETC" "$STATE"
dev_mkdir "$SLURM_ID" 0700 "$SECRETS"
dev_mkdir "$MUNGE_ID" 0755 "$MUNGE_DIR"   # munged wants o+x on its socket directory
dev_mkdir "$MYSQL_ID" 0750 "$MYSQL_DIR"
dev_mkdir "$SLURM_ID" 0755 "$ETC/slurmdbd" "$STATE/ctld"
while read -r node _; do dev_mkdir root:root 0755 "$STATE/slurmd-$node"; done < <(nodes)
dev_mkdir root:root 0755 "$VAR/fakedev"

# ================================================================ 3. munge (private socket)
step "munged" "$MUNGE_DIR/munged.log"
if ! nx_running "$RUN/munged.pid" "/usr/sbin/munged "; then
  # the chroot's own key, generated by its munge package
  [ -s "$ROOT/etc/munge/munge.key" ] || inch mungekey --create --keyfile=/etc/munge/munge.key
  inch chown munge:munge /etc/munge/munge.key; chmod 0600 "$ROOT/etc/munge/munge.key"
  rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
  inch_spawn "$RUN/munged.pid" "$MUNGE_DIR/munged.out" setpriv --reuid=munge --regid=munge --init-groups -- \
    /usr/sbin/munged -F --socket="$MUNGE_SOCK" --pid-file="$MUNGE_DIR/munged.pid" \
    --log-file="$MUNGE_DIR/munged.log" --seed-file="$MUNGE_DIR/munged.seed"
  dev_wait 10 munged "$MUNGE_DIR/munged.log" inch munge -S "$MUNGE_SOCK" -n
fi
inch munge -S "$MUNGE_SOCK" -n | inch unmunge -S "$MUNGE_SOCK" >/dev/null

# ================================================================ 4. MariaDB (127.0.0.1 only)
step "mariadb" "$MYSQL_DIR/mariadbd.err"
if [ ! -s "$DB_PASS_FILE" ]; then
  (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$DB_PASS_FILE")
fi
chown root:root "$DB_PASS_FILE"; chmod 0600 "$DB_PASS_FILE"
DB_PASS=$(cat "$DB_PASS_FILE")
if [ ! -d "$MYSQL_DIR/data/mysql" ]; then
  dev_mkdir "$MYSQL_ID" 0750 "$MYSQL_DIR/data"
  inch mariadb-install-db --no-defaults --datadir="$MYSQL_DIR/data" --user=mysql \
    --auth-root-authentication-method=socket --skip-test-db > "$LOGD/mariadb-install.log" 2>&1 \
    || die "mariadb-install-db failed" "$LOGD/mariadb-install.log"
fi
if ! nx_running "$RUN/mariadbd.pid" "/usr/sbin/mariadbd "; then
  dev_port_free "$MYSQL_PORT" "MariaDB (slurm-next)"
  # innodb settings as slurm.sh's, but a 2G buffer pool: 24.11's slurmdbd logs "error: Database
  # settings not recommended values: innodb_buffer_pool_size" at 1G (22.05 did not). Virtual
  # size only: mariadbd's RSS stays ~170 MB.
  inch_spawn "$RUN/mariadbd.pid" "$LOGD/mariadbd.out" /usr/sbin/mariadbd --no-defaults \
    --datadir="$MYSQL_DIR/data" --socket="$MYSQL_SOCK" --pid-file="$MYSQL_DIR/mariadbd.pid" \
    --port="$MYSQL_PORT" --bind-address=127.0.0.1 --skip-name-resolve --user=mysql \
    --log-error="$MYSQL_DIR/mariadbd.err" --max-allowed-packet=64M \
    --innodb-buffer-pool-size=2G --innodb-log-file-size=64M --innodb-lock-wait-timeout=900
  dev_wait 30 mariadbd "$MYSQL_DIR/mariadbd.err" inch mariadb --no-defaults -S "$MYSQL_SOCK" -u root -e 'select 1'
fi
inch mariadb --no-defaults -S "$MYSQL_SOCK" -u root < <(dev_acct_db_sql "$DB_PASS")

# ================================================================ 5. configuration files
step "configuration"
if [ ! -s "$JWT_KEY" ]; then
  (umask 077; head -c 32 /dev/urandom > "$JWT_KEY")
fi
chown "$SLURM_ID" "$JWT_KEY"; chmod 0600 "$JWT_KEY"
CHANGED=()

# slurmdbd reads slurmdbd.conf from dirname($SLURM_CONF); the slurm.conf beside it stays empty
: > "$ETC/slurmdbd/slurm.conf"
dev_install_file "$ETC/slurmdbd/slurmdbd.conf" 0600 "$SLURM_ID" <<EOF && CHANGED+=(slurmdbd) || true
# written by deploy/dev/slurm-next.sh — edits are overwritten
$(dev_slurmdbd_conf "$MUNGE_SOCK" "$JWT_KEY" "$DBD_PORT" "$LOGD" "$RUN" "$MYSQL_PORT" "$DB_PASS")
EOF

# fake GPUs: character devices with /dev/null's numbers (see slurm.sh)
for i in 0 1; do [ -c "$VAR/fakedev/gpu$i" ] || mknod "$VAR/fakedev/gpu$i" c 1 3; done
dev_install_file "$CONF" 0644 root:root <<EOF && CHANGED+=(ctld) || true
# written by deploy/dev/slurm-next.sh — edits are overwritten
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
$(dev_slurm_conf_auth "$MUNGE_SOCK" "$JWT_KEY")
StateSaveLocation=$STATE/ctld
# several slurmd of one cluster share this host (Debian builds with MultipleSlurmd): %n = node
SlurmdSpoolDir=$STATE/slurmd-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOGD/slurmctld.log
SlurmdLogFile=$LOGD/slurmd-%n.log
$(dev_slurm_conf_common "$DBD_PORT" "gres/gpu,license/matlab")
Licenses=$LICENSES
$(nodes | head -n "$NODES" | while read -r node port; do
  echo "NodeName=$node NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$port CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:2 Features=$FEATURES State=UNKNOWN"
done)
$(nodes | tail -n 1 | while read -r node port; do
  echo "NodeName=$node NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$port CPUs=8 Sockets=1 CoresPerSocket=4 ThreadsPerCore=2 RealMemory=16000 Features=$FEATURES State=UNKNOWN"
done)
PartitionName=$PART Nodes=${PREFIX}[1-$NODES] Default=YES MaxTime=$PART_MAXTIME State=UP TRESBillingWeights="$WEIGHTS"
PartitionName=$SMT_PART Nodes=$SMT_NODE MaxTime=$PART_MAXTIME State=UP TRESBillingWeights="$WEIGHTS"
EOF
# 24.11's slurmd initialises a cgroup plugin even with proctrack/linuxproc + task/none
# (default CgroupPlugin=autodetect) and dies: "No filesystem mounted on /sys/fs/cgroup",
# "Unable to initialize cgroup plugin". 22.05 did not. slurmctld reads this file too.
dev_install_file "$ETC/cgroup.conf" 0644 root:root <<EOF && CHANGED+=(ctld) || true
CgroupPlugin=disabled
EOF
dev_install_file "$ETC/gres.conf" 0644 root:root <<EOF && CHANGED+=(ctld) || true
NodeName=${PREFIX}[1-$NODES] Name=gpu File=$VAR/fakedev/gpu[0-1]
EOF

# ================================================================ 6. slurmdbd
step "slurmdbd" "$LOGD/slurmdbd.log"
if nx_running "$RUN/slurmdbd.pid" "/usr/sbin/slurmdbd -D"; then
  [[ " ${CHANGED[*]} " == *" slurmdbd "* ]] && warn "slurmdbd.conf changed while slurmdbd runs: run slurm-next.sh --stop, then slurm-next.sh, to apply it"
else
  dev_port_free "$DBD_PORT" "slurmdbd (slurm-next)"
  inch_spawn "$RUN/slurmdbd.pid" "$LOGD/slurmdbd.out" SLURM_CONF="$ETC/slurmdbd/slurm.conf" /usr/sbin/slurmdbd -D
  dev_wait 60 slurmdbd "$LOGD/slurmdbd.log" inch sacctmgr -n show cluster
fi
# a cluster must exist in the database before its slurmctld first starts
inch sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER" || inch sacctmgr -i add cluster "$CLUSTER" >/dev/null

# ================================================================ 7. slurmctld + slurmd
step "slurmctld and slurmd" "$LOGD/slurmctld.log"
COLD=0
if nx_running "$RUN/slurmctld.pid" "/usr/sbin/slurmctld -D -f $CONF"; then
  [[ " ${CHANGED[*]} " == *" ctld "* ]] && warn "slurm.conf/gres.conf changed while slurmctld runs: run slurm-next.sh --stop, then slurm-next.sh, to apply it"
else
  dev_port_free "$CTLD_PORT" "slurmctld $CLUSTER"
  log "  slurmctld $CLUSTER :$CTLD_PORT"
  COLD=1
  inch_spawn "$RUN/slurmctld.pid" "$LOGD/slurmctld.out" /usr/sbin/slurmctld -D -f "$CONF"
fi
while read -r node port; do
  nx_running "$RUN/slurmd-$node.pid" "/usr/sbin/slurmd -D -f $CONF" && continue
  dev_port_free "$port" "slurmd $CLUSTER/$node"
  log "  slurmd $CLUSTER/$node :$port"
  inch_spawn "$RUN/slurmd-$node.pid" "$LOGD/slurmd-$node.out" /usr/sbin/slurmd -D -f "$CONF" -N "$node"
done < <(nodes)

dev_wait 60 "slurmctld $CLUSTER to answer" "$LOGD/slurmctld.log" inch scontrol ping
deadline=$(( SECONDS + 60 ))
while :; do
  states=$(inch sinfo -h -N -o '%N %T' 2>/dev/null || true)
  bad=$(awk '$2 !~ /^(idle|mixed|allocated|completing)/' <<<"$states")
  [ -n "$states" ] && [ -z "$bad" ] && break
  while read -r node st; do
    case $st in down* | drain* | inval*) inch scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true ;; esac
  done <<<"$bad"
  if [ $SECONDS -ge $deadline ]; then
    die "nodes of $CLUSTER did not become idle: $(tr '\n' ' ' <<<"$states")" "$LOGD/slurmctld.log" "$LOGD"/slurmd-*.log
  fi
  sleep 0.2
done
log "  $CLUSTER: $(tr '\n' ' ' <<<"$states")"

# A cold slurmctld restores the jobs of an earlier life from its state; when no slurmstepd
# of ours survived, cancel them (see slurm.sh). Only slurmstepd in OUR chroot count.
stepd_alive() {
  local p
  for p in $(chroot_pids); do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] && return 0; done
  return 1
}
if [ $COLD = 1 ] && ! stepd_alive; then
  left=$(inch squeue -h -o %A 2>/dev/null | sort -u | paste -sd' ' -)
  if [ -n "$left" ]; then
    warn "$CLUSTER: cancelling $(wc -w <<<"$left") job(s) left from an earlier life of the stack (no process survived): $left"
    # shellcheck disable=SC2086
    inch scancel $left 2>/dev/null || true
    for (( i = 0; i < 100; i++ )); do [ -z "$(inch squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.2; done
  fi
fi

# ================================================================ 8. accounts, users, QOS
step "accounting (QOS, accounts, users)" "$LOGD/slurmdbd.log"
sam() {
  local out
  out=$(inch sacctmgr -i "$@" 2>&1) && return 0
  # On a stack set up before, 24.11 says "Already existing account …" and, for users already
  # there, "Request didn't affect anything" (exiting 1), where 22.05 says nothing new was added
  case $out in
    *"Nothing new added"* | *"Nothing modified"* | *"already exists"* | *"Already existing"* | \
      *"Request didn't affect anything"*) return 0 ;;
  esac
  die "sacctmgr $* failed: $out" "$LOGD/slurmdbd.log"
}
accounting_fingerprint() {
  { inch sacctmgr -n -P show assoc format=cluster,account,user,parentname,qos,defaultqos,grptresmins
    inch sacctmgr -n -P show qos format=name,usagefactor,priority
    inch sacctmgr -n -P show user format=user,defaultaccount,adminlevel; } | sha256sum | cut -d' ' -f1
}
if [ -s "$STATE/accounting.sha256" ] && [ "$(accounting_fingerprint)" = "$(cat "$STATE/accounting.sha256")" ]; then
  log "  unchanged since the last run: skipped"
else
  # the same tree as slurm.sh's, on cluster next; premium first so that QOS ids match
  sam add qos premium UsageFactor=2.0 Priority=100
  sam add qos standard
  sam modify qos where name=premium set UsageFactor=2.0 Priority=100
  sam add account org Description=org Organization=org Cluster="$CLUSTER"
  sam add account physics,chemistry Parent=org Organization=org Cluster="$CLUSTER"
  sam add user alice,carol Account=physics DefaultAccount=physics Cluster="$CLUSTER"
  sam add user bob,carol Account=chemistry DefaultAccount=chemistry Cluster="$CLUSTER"
  sam modify user where name=alice,carol set DefaultAccount=physics
  sam modify user where name=alice,bob,carol set QOS=normal,standard,premium DefaultQOS=normal
  # carol is a Slurm operator, as on onprem (slurmctld takes --priority from operators only)
  sam modify user where name=carol set AdminLevel=Operator
  # the one limit of slurm.sh's onprem, so that AccountingStorageEnforce=limits has something to check
  sam modify account where name=chemistry cluster="$CLUSTER" set GrpTRESMins=cpu=100000
  accounting_fingerprint > "$STATE/accounting.sha256"
fi

# ================================================================ 9. slurmrestd (auth/jwt)
step "slurmrestd" "$LOGD/slurmrestd.log"
if ! nx_running "$RUN/slurmrestd.pid" "/usr/sbin/slurmrestd "; then
  dev_port_free "$REST_PORT" "slurmrestd $CLUSTER"
  log "  slurmrestd $CLUSTER 127.0.0.1:$REST_PORT"
  # SLURM_JWT=daemon: without it every token is refused (as on 22.05). 24.11 has one
  # openapi plugin per daemon and one data_parser per API version.
  inch_spawn "$RUN/slurmrestd.pid" "$LOGD/slurmrestd.log" SLURM_JWT=daemon \
    setpriv --reuid=slurmrestd --regid=slurmrestd --init-groups -- \
    /usr/sbin/slurmrestd -f "$CONF" -a rest_auth/jwt -s openapi/slurmctld,openapi/slurmdbd \
    -d v0.0.42,v0.0.41,v0.0.40 "127.0.0.1:$REST_PORT"
fi
TOKEN=$(inch scontrol token username=slurm lifespan=300 | sed 's/^SLURM_JWT=//')
ping_ok() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H "X-SLURM-USER-NAME: slurm" -H "X-SLURM-USER-TOKEN: $TOKEN" \
    "http://127.0.0.1:$REST_PORT/slurm/v0.0.42/ping")" = 200 ]
}
dev_wait 30 "slurmrestd to accept a JWT on :$REST_PORT" "$LOGD/slurmrestd.log" ping_ok

# ================================================================ 10. next-slurm wrapper, env.sh
step "env.sh"
dev_install_file "$BIN/next-slurm" 0755 root:root <<EOF || true
#!/bin/sh
# next-slurm [-u USER] CMD [ARGS...] — run CMD in the slurm-next chroot (cluster $CLUSTER,
# Slurm $SLURM_VERSION), as root or as USER. Written by deploy/dev/slurm-next.sh. Needs root.
#   next-slurm sacct -a -X        next-slurm -u alice sbatch --wrap 'sleep 1'
set -e
[ "\$(id -u)" = 0 ] || { echo "next-slurm: needs root (chroot)" >&2; exit 1; }
as=
if [ "\${1:-}" = -u ]; then as=\$2; shift 2; fi
[ \$# -gt 0 ] || { echo "usage: next-slurm [-u USER] CMD [ARGS...]" >&2; exit 2; }
if [ -n "\$as" ]; then
  home=\$(chroot $ROOT getent passwd "\$as" | cut -d: -f6)
  exec chroot $ROOT /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 TZ=\${TZ:-UTC} \\
    SLURM_CONF=$CONF HOME="\$home" USER="\$as" LOGNAME="\$as" \\
    setpriv --reuid="\$as" --regid="\$(chroot $ROOT id -g "\$as")" --init-groups -- \\
    sh -c 'cd "\$HOME" 2>/dev/null || cd /tmp; exec "\$@"' next-slurm "\$@"
fi
exec chroot $ROOT /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
  LANG=C.UTF-8 TZ=\${TZ:-UTC} HOME=/root SLURM_CONF=$CONF "\$@"
EOF
# The Slurm client programs bursar runs itself (the sacct collector, reconcile), as programs
# of the host: each keeps the caller's TZ, SLURM_TIME_FORMAT and SLURM_CONF (the path is the
# same inside the chroot), which next-slurm's clean environment would drop.
for prog in sacct sreport sacctmgr; do
  dev_install_file "$BIN/$prog" 0755 root:root <<EOF || true
#!/bin/sh
# $prog of cluster $CLUSTER (Slurm $SLURM_VERSION), run in its chroot. Written by deploy/dev/slurm-next.sh.
# A SLURM_CONF of the caller's is kept only when the chroot has it (the host's dev env exports
# the 22.05 clusters' own, which is not this cluster's).
conf=\${SLURM_CONF:-$CONF}
[ -e "$ROOT\$conf" ] || conf=$CONF
exec chroot $ROOT /usr/bin/env -i PATH=/usr/bin:/bin LANG=C.UTF-8 TZ="\${TZ:-UTC}" \\
  SLURM_CONF="\$conf" \${SLURM_TIME_FORMAT:+SLURM_TIME_FORMAT="\$SLURM_TIME_FORMAT"} /usr/bin/$prog "\$@"
EOF
done
{
  echo "# written by deploy/dev/slurm-next.sh — source it:  . $D/env.sh"
  echo "export BURSAR_NEXT_DIR=$D"
  echo "export BURSAR_NEXT_ROOT=$ROOT   # the trixie chroot"
  echo "export BURSAR_NEXT_SLURM_VERSION=$SLURM_VERSION"
  echo "export BURSAR_NEXT_CLUSTER=$CLUSTER"
  echo "export BURSAR_NEXT_RESTD_URL=http://127.0.0.1:$REST_PORT"
  echo "export BURSAR_NEXT_SLURM_OPENAPI=\"v0.0.42 v0.0.41 v0.0.40\"   # /slurm/v0.0.4x/..., /slurmdb/v0.0.4x/..."
  echo "export BURSAR_NEXT_CONF=$CONF   # SLURM_CONF inside the chroot (same path on the host)"
  echo "export BURSAR_NEXT_JWT_KEY=$JWT_KEY   # HS256 key; claims {exp,iat,sun}"
  echo "export BURSAR_NEXT_SLURM_ADMIN_USER=slurm   # its token may set any X-SLURM-USER-NAME"
  echo "export BURSAR_NEXT_SLURM_USERS=\"${USERS[*]}\""
  echo "export BURSAR_NEXT_BIN=$BIN/next-slurm   # next-slurm [-u USER] CMD...: run CMD in the chroot (root only)"
  echo "export BURSAR_NEXT_SACCT=$BIN/sacct   # sacct, sreport, sacctmgr of the chroot as host programs (root only): TZ, SLURM_TIME_FORMAT and SLURM_CONF kept"
  echo "export BURSAR_NEXT_CHROOT_CMD=\"chroot $ROOT /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin TZ=UTC SLURM_CONF=$CONF\""
  echo "export BURSAR_NEXT_MUNGE_SOCKET=$MUNGE_SOCK   # inside the chroot (same path on the host)"
  echo "export BURSAR_NEXT_SLURMCTLD=127.0.0.1:$CTLD_PORT"
  echo "export BURSAR_NEXT_SLURMDBD=127.0.0.1:$DBD_PORT"
  echo "export BURSAR_NEXT_SLURM_ACCT_DB=mysql://slurm@127.0.0.1:$MYSQL_PORT/slurm_acct_db"
  echo "export BURSAR_NEXT_SLURM_ACCT_DB_PASSWORD_FILE=$DB_PASS_FILE"
  echo "# the names slurm.sh's env.sh uses per cluster"
  echo "export BURSAR_DEV_NEXT_CONF=$CONF"
  echo "export BURSAR_DEV_NEXT_REST=http://127.0.0.1:$REST_PORT"
} | dev_install_file "$D/env.sh" 0644 root:root || true

DEV_STEP=""
log "slurm-next up in $(dev_elapsed) s (host packages $T_HOSTPKG s, debootstrap until $T_DEBOOTSTRAP s, chroot packages until $T_CHROOTPKG s)"
cat <<EOF
  next    Slurm $SLURM_VERSION ($SUITE chroot $ROOT), nodes ${PREFIX}[1-$NODES], partition $PART, gres gpu:2 per node; $SMT_NODE (2 threads/core), partition $SMT_PART;
          slurmctld :$CTLD_PORT, slurmd :$SLURMD_PORT.., slurmdbd :$DBD_PORT, MariaDB 127.0.0.1:$MYSQL_PORT
  REST    http://127.0.0.1:$REST_PORT (OpenAPI v0.0.40, v0.0.41, v0.0.42; auth/jwt)
  users   alice→physics, bob→chemistry, carol→physics+chemistry (default physics); QOS normal, standard, premium
  env     . $D/env.sh      cli: $BIN/next-slurm sacct -a     logs: $LOGD/
  stop    deploy/dev/slurm-next.sh --stop
EOF
