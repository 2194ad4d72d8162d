#!/bin/bash
# Call H2, on H1's machine right after it (still warm), as one device command: issue 21's goals in two passes
# (52ad69d's library), then the Python GPU tests.
source .device-deps/gpu-env.sh
GOALS_PASSES=2 timeout 240 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1
timeout 200 scripts/gpu-session.sh pytest-gpu 2>&1 | tail -8
