#!/usr/bin/env bash
# deploy/dev/dstack.sh — a real dstack server (PyPI dstack[server]==0.22.5) on 127.0.0.1
# for bursar's tests: project "hpc", users alice (project user), carol (project manager),
# bob (no member), and seven FINISHED runs loaded by dstack_seed_runs.py.
#
# Everything lives under $BURSAR_DEV_DIR/dstack: venv/, home/ (HOME of the server: it
# writes ~/.dstack there), home/server/ (config.yml, data/sqlite.db), log/, run/, and
# env.sh (URL and tokens; source it in tests). Idempotent: installs only when the pinned
# version is missing, starts the server only when ours is not running, creates only
# missing users, skips runs already loaded.
#
# No root needed, unless python3 lacks venv/ensurepip (then python3-venv is installed
# with apt-get). No Docker, no cloud credentials; only PyPI is contacted (the server's
# own attempts to download gpuhunt catalogs fail harmlessly and are kept out of the log).
#
# Knobs: BURSAR_DEV_DIR, BURSAR_DEV_PORT_OFFSET (port 3000 + offset),
#   BURSAR_DEV_PYTHON (python3; >= 3.10), BURSAR_DEV_DSTACK_ADMIN_TOKEN (default: random,
#   kept in dstack/admin.token), BURSAR_DEV_DSTACK_SEED_BASE (2026-01-05T08:00:00Z),
#   BURSAR_DEV_DSTACK_CONSTRAINTS (dstack-constraints.txt beside this script; "none" = no pins).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
dev_trap_errors

# The seeder uses server internals: change the version only together with it.
DSTACK_VERSION=0.22.5
PROJECT=hpc
D=$BURSAR_DEV_DIR/dstack
VENV=$D/venv PY=$D/venv/bin/python
LOGD=$D/log RUN=$D/run
SERVER_HOME=$D/home SERVER_DIR=$D/home/server
PORT=$((3000 + BURSAR_DEV_PORT_OFFSET))
URL=http://127.0.0.1:$PORT
SEED_BASE=${BURSAR_DEV_DSTACK_SEED_BASE:-2026-01-05T08:00:00Z}
CONSTRAINTS=${BURSAR_DEV_DSTACK_CONSTRAINTS:-$HERE/dstack-constraints.txt}
step() { DEV_STEP=$1; DEV_STEP_LOG=${2:-}; log "$1"; }
dev_claim "$D"
mkdir -p "$LOGD" "$RUN" "$SERVER_DIR"

# ================================================================ 1. venv + dstack
step "dstack $DSTACK_VERSION in $VENV" "$LOGD/pip.log"
installed() { [ -x "$PY" ] && "$PY" -c "import dstack.version as v, uvicorn; assert v.__version__ == '$DSTACK_VERSION'" 2>/dev/null; }
if ! installed; then
  BOOT_PY=${BURSAR_DEV_PYTHON:-python3}
  command -v "$BOOT_PY" >/dev/null || die "$BOOT_PY not found (set BURSAR_DEV_PYTHON to a python >= 3.10)"
  "$BOOT_PY" -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null \
    || die "dstack $DSTACK_VERSION needs python >= 3.10; $BOOT_PY is $("$BOOT_PY" -V 2>&1)"
  if ! "$BOOT_PY" -c 'import ensurepip' 2>/dev/null; then   # Debian ships venv separately
    dev_apt_install python3-venv
  fi
  "$BOOT_PY" -m venv --clear "$VENV" > "$LOGD/pip.log" 2>&1 || die "could not create $VENV" "$LOGD/pip.log"
  pins=()
  [ "$CONSTRAINTS" = none ] || pins=(-c "$CONSTRAINTS")
  log "  pip install dstack[server]==$DSTACK_VERSION (PyPI)"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${pins[@]}" "dstack[server]==$DSTACK_VERSION" \
    >> "$LOGD/pip.log" 2>&1 || die "pip install dstack[server]==$DSTACK_VERSION failed" "$LOGD/pip.log"
  installed || die "dstack $DSTACK_VERSION is not importable after pip install" "$LOGD/pip.log"
fi
T_INSTALL=$(dev_elapsed)

# ================================================================ 2. server
step "server on $URL" "$LOGD/server.log"
if [ -n "${BURSAR_DEV_DSTACK_ADMIN_TOKEN:-}" ]; then
  ADMIN_TOKEN=$BURSAR_DEV_DSTACK_ADMIN_TOKEN
elif [ -s "$D/admin.token" ]; then
  ADMIN_TOKEN=$(cat "$D/admin.token")
else
  ADMIN_TOKEN=bursar-dev-admin-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
fi
# the server takes the admin token only when it first creates the admin user: keep it
(umask 077; printf '%s\n' "$ADMIN_TOKEN" > "$D/admin.token")

healthy() { curl -sf -o /dev/null --max-time 2 "$URL/healthcheck"; }
SERVER_MATCH="$VENV/bin/dstack server"
if dev_running "$RUN/server.pid" "$SERVER_MATCH"; then
  log "  already running (pid $(dev_pid "$RUN/server.pid"))"
else
  dev_port_free "$PORT" "dstack server"
  # DSTACK_SERVER_ROOT_LOG_LEVEL=CRITICAL: with no internet, gpuhunt logs ~1,200 lines of
  # catalog-download tracebacks at start and every 10 min; dstack's own INFO lines stay.
  # -y: write the client config (~/.dstack/config.yml, under our HOME) without asking.
  dev_spawn "$RUN/server.pid" "$LOGD/server.log" env \
    HOME="$SERVER_HOME" DSTACK_SERVER_DIR="$SERVER_DIR" DSTACK_SERVER_ADMIN_TOKEN="$ADMIN_TOKEN" \
    DSTACK_ENABLE_PROMETHEUS_METRICS=1 DSTACK_SERVER_ROOT_LOG_LEVEL=CRITICAL DSTACK_SERVER_LOG_FORMAT=standard \
    "$VENV/bin/dstack" server --host 127.0.0.1 --port "$PORT" -y
  dev_wait 120 "the dstack server to answer $URL/healthcheck" "$LOGD/server.log" healthy
  log "  started (pid $(dev_pid "$RUN/server.pid"))"
fi
dev_wait 30 "the dstack server to answer $URL/healthcheck" "$LOGD/server.log" healthy

# api PATH JSON [TOKEN] — POST; the body on stdout; non-2xx: message on stderr, return 1
api() {
  local out code
  out=$(curl -sS -X POST "$URL$1" -H "Authorization: Bearer ${3:-$ADMIN_TOKEN}" \
    -H 'Content-Type: application/json' -d "$2" -w $'\n%{http_code}') || return 1
  code=${out##*$'\n'} out=${out%$'\n'*}
  [[ $code == 2* ]] && { printf '%s' "$out"; return 0; }
  printf 'HTTP %s from %s: %s\n' "$code" "$1" "$out" >&2
  return 1
}
json() { "$PY" -c "import json, sys; d = json.load(sys.stdin); print($1)"; }
api /api/users/get_my_user '{}' >/dev/null 2>&1 \
  || die "the server on $URL does not accept the admin token in $D/admin.token (was its database created with another one? stop.sh --wipe starts over)" "$LOGD/server.log"

# ================================================================ 3. project, users
step "project $PROJECT and users"
if ! api "/api/projects/$PROJECT/get" '{}' >/dev/null 2>&1; then
  api /api/projects/create "{\"project_name\":\"$PROJECT\",\"is_public\":false}" >/dev/null
  log "  created project $PROJECT"
fi
declare -A TOKENS
for u in alice bob carol; do
  if ! body=$(api /api/users/get_user "{\"username\":\"$u\"}" 2>/dev/null); then
    api /api/users/create "{\"username\":\"$u\",\"global_role\":\"user\"}" >/dev/null
    body=$(api /api/users/get_user "{\"username\":\"$u\"}")
    log "  created user $u"
  fi
  TOKENS[$u]=$(json 'd["creds"]["token"]' <<<"$body")
done
# bob stays out of the project on purpose: a non-member sees [] and gets 403s
api "/api/projects/$PROJECT/add_members" \
  '{"members":[{"username":"alice","project_role":"user"},{"username":"carol","project_role":"manager"}]}' >/dev/null

# ================================================================ 4. finished runs
step "seeding finished runs" "$LOGD/seed.log"
# The seeder takes ~2.5 s just to import the server; skip it when this exact seeder
# (and base time) already ran against this database and the runs are visible.
list_runs() { api /api/runs/list "{\"project_name\":\"$PROJECT\",\"limit\":100}"; }
seed_key="$(sha256sum "$HERE/dstack_seed_runs.py" | cut -c1-16) $PROJECT $SEED_BASE"
runs=$(list_runs)
if [ "$(cat "$RUN/seeded" 2>/dev/null)" = "$seed_key" ] && [ "$(json 'len(d)' <<<"$runs")" -ge 7 ]; then
  log "  already loaded"
else
  seeded=$(HOME="$SERVER_HOME" DSTACK_SERVER_DIR="$SERVER_DIR" "$PY" "$HERE/dstack_seed_runs.py" \
    --project "$PROJECT" --base "$SEED_BASE" 2>"$LOGD/seed.log" | tail -1) \
    || die "dstack_seed_runs.py failed" "$LOGD/seed.log"
  log "  $seeded"
  runs=$(list_runs)
  echo "$seed_key" > "$RUN/seeded"
fi
n=$(json 'len(d)' <<<"$runs")
[ "$n" -ge 7 ] || die "/api/runs/list shows $n runs in $PROJECT, expected at least 7" "$LOGD/server.log" "$LOGD/seed.log"

# ================================================================ 5. env.sh + summary
step "env.sh"
dev_install_file "$D/env.sh" 0600 "$(id -u):$(id -g)" <<EOF || true
# written by deploy/dev/dstack.sh — source it:  . $D/env.sh
export BURSAR_DEV_DSTACK_URL=$URL
export BURSAR_DEV_DSTACK_VERSION=$DSTACK_VERSION
export BURSAR_DEV_DSTACK_PROJECT=$PROJECT
export BURSAR_DEV_DSTACK_ADMIN_USER=admin
export BURSAR_DEV_DSTACK_ADMIN_TOKEN=$ADMIN_TOKEN
export BURSAR_DEV_DSTACK_TOKEN_ALICE=${TOKENS[alice]}   # member of $PROJECT, role user
export BURSAR_DEV_DSTACK_TOKEN_CAROL=${TOKENS[carol]}   # member of $PROJECT, role manager
export BURSAR_DEV_DSTACK_TOKEN_BOB=${TOKENS[bob]}       # not a member of $PROJECT
export BURSAR_DEV_DSTACK_SEED_BASE=$SEED_BASE
export BURSAR_DEV_DSTACK_SQLITE=$SERVER_DIR/data/sqlite.db
EOF

DEV_STEP=""
log "dstack up in $(dev_elapsed) s (install $T_INSTALL s)"
echo "  server     $URL (dstack $DSTACK_VERSION, pid $(dev_pid "$RUN/server.pid")), Swagger UI $URL/api/docs"
echo "  project    $PROJECT: alice (user), carol (manager); bob is not a member; admin token in env.sh"
echo "  runs       $n in $PROJECT:"
json '"\n".join("             %-16s %-6s %-11s cost=%-7s deleted=%s" % (r["run_spec"]["run_name"], r["user"], r["status"], r["cost"], r["deleted"]) for r in d)' <<<"$runs"
echo "  env        . $D/env.sh"
echo "  logs       $LOGD/"
