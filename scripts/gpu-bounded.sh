#!/usr/bin/env bash
# One bounded call on the GPU machine: each step of scripts/gpu-session.sh under its own time limit, so
# that a step that hangs costs only its limit and the logs of every step still come back. The logs are
# archived into $OUT every 30 s as well as at the end (a call killed at the device's limit keeps them).
# Usage, from the repository root on the GPU machine, after `source .device-deps/gpu-env.sh`:
#   scripts/gpu-bounded.sh "150:build 120:test 450:pytest 60:pip"     (seconds:step, in order)
set -uo pipefail
export FERRY_BUILD_DIR=${FERRY_BUILD_DIR:-build-gpu}
out=$FERRY_BUILD_DIR/out
mkdir -p "$out"
archive() { [ -n "${OUT:-}" ] && tar czf "$OUT/out.tgz.part" -C "$out" . 2>/dev/null && mv "$OUT/out.tgz.part" "$OUT/out.tgz"; }
( while sleep 30; do archive; done ) &
keeper=$!
for item in $1; do
  limit=${item%%:*} step=${item#*:}
  echo "== $(date -u +%H:%M:%S) $step (limit $limit s)"
  OUT= timeout -k 5 "$limit" bash scripts/gpu-session.sh "$step" 2>&1
  echo "   ($step: exit $?)"
done
kill "$keeper" 2>/dev/null
archive
echo "== $(date -u +%H:%M:%S) done"
