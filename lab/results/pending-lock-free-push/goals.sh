#!/usr/bin/env bash
# Written 2026-12-06, to follow calls.sh on the same warm machine: issue 50's goals on the tree that call chose.
#   goals.sh push|base goals         build, then the small-read goals (lab/small_reads_goals.py)
#   goals.sh push|base no-regression  hot big reads, first reads and safetensors against 189e30e (.old-tree), 2 rounds
# `push` applies push.patch to this copy of the tree first (each call gets a fresh copy of the tracked files; the
# build folder stays between calls on a warm machine). Carry .device-deps and .old-tree.
set -uo pipefail
source .device-deps/gpu-env.sh
here=lab/results/pending-lock-free-push
if [ "$1" = push ] && ! git apply -R --check "$here/push.patch" 2>/dev/null; then
  git apply "$here/push.patch" || exit 1
fi
git diff --stat > "$OUT/tree-diff.txt" 2>&1
case $2 in
  goals) scripts/gpu-bounded.sh "200:build 240:small-reads-goals" ;;
  no-regression) OLD_TREE=.old-tree NR_ROUNDS=2 scripts/gpu-bounded.sh "200:build 380:no-regression" ;;
esac
