#!/bin/bash
# Call N2 (2026-12-04, right after N1 on the same machine, its build kept): the Python GPU tests, then issue 21's
# goals in one pass. Sent as one command line; written out here.
source .device-deps/gpu-env.sh
echo "== $(date -u +%T) start"
timeout 200 scripts/gpu-session.sh pytest-gpu > $OUT/pytest-gpu.log 2>&1; echo "pytest-gpu rc=$?"
tail -6 $OUT/pytest-gpu.log
echo "== $(date -u +%T) pytest done"
GOALS_PASSES=1 timeout 330 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1; echo "goals rc=$?"
tail -45 $OUT/goals.log
(cd build-gpu/out && tar czf $OUT/goals-out.tgz goals-* 2>/dev/null)
echo "== $(date -u +%T) end"
