#!/usr/bin/env bash
# bursar's main job on a fresh machine: build, create a ledger, import a real sacct dump from two
# clusters (on-prem in core-hours, cloud in dollars), set allocations in both currencies, and
# print balances and a usage report.
#
#   deploy/demo.sh            # state in ./demo/ (removed and recreated on every run)
#   DEMO_DIR=/tmp/x deploy/demo.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
demo="${DEMO_DIR:-$root/demo}"

if ! command -v cargo >/dev/null; then
  echo "cargo is required (Rust 1.94.1 or newer): https://rustup.rs" >&2
  exit 1
fi

echo "==> building bursar (release)"
cargo build --release --locked --quiet --manifest-path "$root/Cargo.toml" --bin bursar
bursar="$root/target/release/bursar"

rm -rf "$demo"
mkdir -p "$demo"
cp "$root/deploy/examples/bursar.yaml" "$demo/bursar.yaml"
export BURSAR_CONFIG="$demo/bursar.yaml"

run() { printf '\n$ %s\n' "$*"; "$@"; }

run "$bursar" config check
run "$bursar" import "$root/deploy/examples/sacct-narrow.psv"
run "$bursar" alloc set org --currency su --amount 100 --from 2026-11-01 --to 2026-12-01
run "$bursar" alloc set physics --currency su --amount 40 --from 2026-11-01 --to 2026-12-01
run "$bursar" alloc set org --currency usd --amount 250.00 --from 2026-11-01 --to 2026-12-01
run "$bursar" accounts
run "$bursar" balance --at 2026-11-22T12:00:00
run "$bursar" report usage --from 2026-11-01 --to 2026-12-01 --by account,cluster,qos
run "$bursar" report usage --from 2026-11-01 --to 2026-12-01 --by user --format json
echo
echo "Re-importing the same file changes nothing:"
run "$bursar" import "$root/deploy/examples/sacct-narrow.psv"
echo
echo "The ledger is $demo/bursar.db; run more commands with BURSAR_CONFIG=$demo/bursar.yaml $bursar --help"
