#!/bin/bash
# Call G4 of 2026-12-03: issue 21's goals on c13ae47 (two passes, judged on medians).
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
scripts/gpu-session.sh build 2>&1 | tail -2
GOALS_PASSES=2 timeout 480 scripts/gpu-session.sh small-reads-goals 2>&1 | tail -40
tar czf $OUT/g4.tgz --exclude='*.bin' -C build-gpu out
