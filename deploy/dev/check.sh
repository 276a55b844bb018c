#!/usr/bin/env bash
# deploy/dev/check.sh — smoke test of the running dev stack; exit 1 if any check fails.
#
# Slurm: both slurmctld answer; sacct lists the jobs of the last slurm-jobs.sh run on
# both clusters; slurmrestd accepts a token from `scontrol token`, a token minted here
# with HS256 over the key file (what the gateway does), and a SlurmUser token acting as
# another user; refuses a request without token (401).
# dstack: /healthcheck; /api/runs/list returns the seeded runs with the expected costs;
# alice sees the project's runs, bob (no member) sees none.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
set -uo pipefail
[ -r "$BURSAR_DEV_DIR/env.sh" ] || die "no $BURSAR_DEV_DIR/env.sh: run deploy/dev/up.sh first"
# shellcheck source=/dev/null
. "$BURSAR_DEV_DIR/env.sh"

FAILED=0
ok() { printf '  ok    %s\n' "$1"; }
bad() { printf '  FAIL  %s\n' "$1"; FAILED=$((FAILED + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
http() { # http URL [curl args...] -> status code
  local url=$1; shift
  curl -s -o /tmp/bursar-dev-check.$$ -w '%{http_code}' "$@" "$url"
}
body() { cat /tmp/bursar-dev-check.$$; }
trap 'rm -f /tmp/bursar-dev-check.$$' EXIT

# mint USER [KEYFILE] — HS256 Slurm JWT, claims {exp, iat, sun}, key = raw key-file bytes
mint() {
  python3 - "$1" "${2:-$BURSAR_DEV_JWT_KEY}" <<'PY'
import base64, hashlib, hmac, json, sys, time
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
now = int(time.time())
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
body = b64(json.dumps({"exp": now + 300, "iat": now, "sun": sys.argv[1]}, separators=(",", ":")).encode())
key = open(sys.argv[2], "rb").read()
print(f"{head}.{body}." + b64(hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()))
PY
}

if [ -n "${BURSAR_DEV_SLURM_DIR:-}" ]; then
  log "slurm"
  for c in $BURSAR_DEV_SLURM_CLUSTERS; do
    conf_var=BURSAR_DEV_${c^^}_CONF
    check "slurmctld $c answers" eval "SLURM_CONF=${!conf_var} scontrol ping >/dev/null"
  done
  tsv=$BURSAR_DEV_SLURM_DIR/jobs/latest/jobs.tsv
  if [ -s "$tsv" ]; then
    since=$(cat "$BURSAR_DEV_SLURM_DIR/jobs/latest/start-time")
    listed=$(sacct -M "${BURSAR_DEV_SLURM_CLUSTERS// /,}" --allusers --duplicates -X -n -P -S "${since%%T*}" -o Cluster,JobID)
    absent=$(tail -n +2 "$tsv" | while IFS=$'\t' read -r c name _ _ id _; do
      # cancel-pending never became eligible: time-window queries leave it out (REPORT)
      [ "$name" = cancel-pending ] && continue
      grep -qE "^$c\|$id([_+].*)?$" <<<"$listed" || echo "$c/$name/$id"
    done)
    check "sacct -M ${BURSAR_DEV_SLURM_CLUSTERS// /,} -S ${since%%T*} lists the $(($(wc -l < "$tsv") - 1)) jobs of the last slurm-jobs.sh run${absent:+ (missing: $absent)}" \
      test -z "$absent"
  else
    echo "  (no slurm-jobs.sh run yet: sacct check skipped)"
  fi

  REST=$BURSAR_DEV_ONPREM_REST V=$BURSAR_DEV_SLURM_OPENAPI
  tok=$(scontrol token username=alice lifespan=300 | sed 's/^SLURM_JWT=//')
  for c in $BURSAR_DEV_SLURM_CLUSTERS; do
    url_var=BURSAR_DEV_${c^^}_REST
    code=$(http "${!url_var}/slurm/$V/ping" -H "X-SLURM-USER-NAME: alice" -H "X-SLURM-USER-TOKEN: $tok")
    check "$c slurmrestd ping with an 'scontrol token' token -> $code" test "$code" = 200
  done
  minted=$(mint alice)
  code=$(http "$REST/slurm/$V/ping" -H "X-SLURM-USER-NAME: alice" -H "X-SLURM-USER-TOKEN: $minted")
  check "onprem ping with a token minted from \$BURSAR_DEV_JWT_KEY -> $code" test "$code" = 200
  code=$(http "$REST/slurmdb/$V/jobs?cluster=onprem%2Ccloud" -H "X-SLURM-USER-NAME: alice" -H "X-SLURM-USER-TOKEN: $minted")
  n=$(body | python3 -c 'import json, sys; print(len(json.load(sys.stdin).get("jobs", [])))' 2>/dev/null)
  check "slurmdb jobs of both clusters with the minted token -> $code, ${n:-?} jobs" test "$code" = 200
  code=$(http "$REST/slurm/$V/jobs" -H "X-SLURM-USER-NAME: bob" -H "X-SLURM-USER-TOKEN: $(mint "$BURSAR_DEV_SLURM_ADMIN_USER")")
  check "SlurmUser token acting as bob -> $code" test "$code" = 200
  code=$(http "$REST/slurm/$V/ping")
  check "no token -> $code (401 expected)" test "$code" = 401
fi

if [ -n "${BURSAR_DEV_DSTACK_URL:-}" ]; then
  log "dstack"
  U=$BURSAR_DEV_DSTACK_URL P=$BURSAR_DEV_DSTACK_PROJECT
  check "healthcheck" curl -sf -o /dev/null "$U/healthcheck"
  runs() { http "$U/api/runs/list" -X POST -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -d "{\"project_name\":\"$P\"}"; }
  code=$(runs "$BURSAR_DEV_DSTACK_ADMIN_TOKEN")
  summary=$(body | python3 -c '
import json, sys
want = {"seed-train-a100": 2.6445, "seed-multinode": 6.8064, "seed-spot-retry": 0.182, "seed-failed-cpu": 0.0156,
        "seed-stopped": 0.138, "seed-onprem-ssh": 0.0, "seed-deleted": 0.0192}
got = {r["run_spec"]["run_name"]: r["cost"] for r in json.load(sys.stdin)}
wrong = [f"{k}={got.get(k)}" for k, v in want.items() if got.get(k) != v]
print(f"{len(got)} runs" + (f", wrong/missing: {wrong}" if wrong else ", all 7 seeded runs with the expected cost"))
sys.exit(1 if wrong else 0)' 2>&1); costs_ok=$?
  check "/api/runs/list as admin -> $code, $summary" test "$code" = 200 -a "$costs_ok" = 0
  code=$(runs "$BURSAR_DEV_DSTACK_TOKEN_ALICE"); n=$(body | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))' 2>/dev/null)
  check "/api/runs/list as alice (member) -> $code, ${n:-?} runs" test "$code" = 200 -a "${n:-0}" -ge 7
  code=$(runs "$BURSAR_DEV_DSTACK_TOKEN_BOB"); n=$(body | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))' 2>/dev/null)
  check "/api/runs/list as bob (not a member) -> $code, ${n:-?} runs" test "$code" = 200 -a "${n:-1}" = 0
fi

[ $FAILED = 0 ] && log "all checks passed" || { log "$FAILED check(s) FAILED"; exit 1; }
