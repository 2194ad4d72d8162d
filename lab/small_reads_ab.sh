#!/usr/bin/env bash
# Issue 21's small reads, this tree against an older one in the same call (machines of one kind differ by
# more than the changes measured): builds the older tree's ferry_small_reads from .old-tree (carried; make it
# with `mkdir .old-tree && git archive COMMIT | tar -x -C .old-tree`), then runs both on the same file,
# alternating old and new, hot then cold, and prints each row old beside new (summary.txt). Run on the GPU
# machine after `scripts/gpu-session.sh build`.
# The older tree's ferry and ferry-bench are built too (build-old/cli), for the `ab` step of gpu-session.sh.
#
#   lab/small_reads_ab.sh OUT_DIR [ROUNDS] [COLD_ROUNDS]   (rounds of each, default 1 and ROUNDS)
#     HOT_ARGS   ferry_small_reads arguments for the hot rounds (default: 4 KiB, 64 KiB and 1 MiB, 512 MiB a mode)
#     COLD_ARGS  the same for the cold rounds (default: 4 KiB and 64 KiB, 64 MiB a mode; "" skips them)
set -uo pipefail
out=$1
rounds=${2:-1}
cold_rounds=${3:-$rounds}
build=${FERRY_BUILD_DIR:-build-gpu}
mkdir -p "$out"
new=$build/lab/ferry_small_reads
# The older tree's binary is in build-old/lab/, or in build-old/tests/ for a tree from before lab/ existed.
old_binary() {
  for d in lab tests; do [ -x "build-old/$d/ferry_small_reads" ] && { echo "build-old/$d/ferry_small_reads"; return; }; done
}
old=$(old_binary)
if [ -z "$old" ]; then
  [ -d .old-tree ] || { echo "no .old-tree to build the older ferry_small_reads from"; exit 1; }
  cmake -S .old-tree -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
    > "$out/old-cmake.log" 2>&1 && cmake --build build-old -j "$(nproc)" --target ferry_small_reads ferry_cli ferry_bench \
    > "$out/old-build.log" 2>&1 || { tail -20 "$out/old-build.log"; exit 1; }
  old=$(old_binary)
fi
file=$build/data/small-4GiB.bin
[ -f "$file" ] || { "$build/cli/ferry" write "$file" --size 4GiB --no-sync > /dev/null && sync; }
hot=${HOT_ARGS:---sizes 4KiB,64KiB,1MiB --bytes-per-mode 512MiB}
cold=${COLD_ARGS---sizes 4KiB,64KiB --bytes-per-mode 64MiB --modes raw-host,plain,ferry,ferry-mt,batch}
# passes CACHE ARGS ROUNDS: old then new, ROUNDS times
passes() {
  for round in $(seq "$3"); do
    [ "$1" = hot ] && cat "$file" > /dev/null
    for which in old new; do
      bin=$new; [ "$which" = old ] && bin=$old
      echo "== $1, $which, round $round"
      # shellcheck disable=SC2086
      "$bin" "$file" --cache "$1" $2 --json-out "$out/$1-$which-$round.json" 2>&1 | tee "$out/$1-$which-$round.txt"
    done
  done
}
passes hot "$hot" "$rounds"
[ -z "$cold" ] || passes cold "$cold" "$cold_rounds"
python3 "$(dirname "$0")/small_reads_ab_summary.py" "$out" | tee "$out/summary.txt"
