#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian 12 machine and runs every check:
# formatting, lints, then all tests — unit, property, and end-to-end through the real
# `bursar` binary against real Slurm 22.05 (two clusters, slurmdbd on MariaDB, slurmrestd with
# JWT), real Slurm 24.11 (one cluster in a Debian 13 chroot) and a real dstack server, which
# deploy/dev/ installs and starts (as root).
#
#   deploy/test.sh                 # everything
#   BURSAR_TEST_NO_STACK=1 deploy/test.sh   # skip starting the servers (live tests then fail)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

step() { printf '\n==> %s [%ss]\n' "$*" "$SECONDS"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -E "$@"; fi; }

if ! command -v cargo >/dev/null; then
  echo "cargo is required (Rust 1.94.1 or newer): https://rustup.rs" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# A whole-workspace build gains nothing from incremental state (3 GB of it); keep disk use low.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$target_dir"
free_kb=$(df -Pk "$target_dir" | awk 'NR == 2 { print $4 }')
step "disk: $((free_kb / 1024)) MiB free under $target_dir"
if [ "$free_kb" -lt $((5 * 1024 * 1024)) ]; then
  echo "warning: a full build and test run needs about 4 GiB for target/ and 2 GiB for the dev stack" >&2
fi

# The servers install and start in the background while the code compiles.
stack_log="${TMPDIR:-/tmp}/bursar-dev-up.$$.log"
stack_pid=
if [ -z "${BURSAR_TEST_NO_STACK:-}" ]; then
  step "starting the dev stack in the background (log: $stack_log)"
  as_root "$root/deploy/dev/up.sh" >"$stack_log" 2>&1 &
  stack_pid=$!
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo build (the binaries the end-to-end tests drive)"
cargo build --workspace --bins --locked
cargo test --workspace --locked --no-run

if [ -n "$stack_pid" ]; then
  step "waiting for the dev stack"
  if ! wait "$stack_pid"; then
    tail -n 60 "$stack_log" >&2
    echo "deploy/dev/up.sh failed (full log: $stack_log)" >&2
    exit 1
  fi
  tail -n 6 "$stack_log"
  step "running the job mix on both Slurm clusters"
  as_root "$root/deploy/dev/slurm-jobs.sh" --quick
fi

step "cargo test ($(df -Pk "$target_dir" | awk 'NR == 2 { print int($4 / 1024) }') MiB free)"
cargo test --workspace --locked --no-fail-fast
step "done"
