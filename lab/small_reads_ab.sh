#!/usr/bin/env bash
# Issue 21's small reads, this tree against other trees in the same call (machines of one kind differ by more
# than the changes measured): builds each other tree's ferry_small_reads, then runs them all on the same file,
# alternating, hot then cold, and prints each row of every other tree beside this one's (summary.txt). Run on
# the GPU machine after `scripts/gpu-session.sh build`.
# The other trees are folders carried with the call, made with `mkdir DIR && git archive COMMIT | tar -x -C DIR`:
#   TREES="old=.old-tree"   (the default) names them: NAME=DIR, separated by spaces; NAME is a word ("new" is
#                           this tree). A tree's build goes to build-NAME; "old"'s ferry and ferry-bench too, for
#                           the `ab` step of gpu-session.sh (build-old/cli).
#
#   lab/small_reads_ab.sh OUT_DIR [ROUNDS] [COLD_ROUNDS]   (rounds of each, default 1 and ROUNDS)
#     HOT_ARGS   ferry_small_reads arguments for the hot rounds (default: 4 KiB, 64 KiB and 1 MiB, 512 MiB a mode)
#     COLD_ARGS  the same for the cold rounds (default: 4 KiB and 64 KiB, 64 MiB a mode; "" skips them)
set -uo pipefail
out=$1
rounds=${2:-1}
cold_rounds=${3:-$rounds}
build=${FERRY_BUILD_DIR:-build-gpu}
trees=${TREES:-old=.old-tree}
mkdir -p "$out"
declare -A binary=([new]=$build/lab/ferry_small_reads)
names=()
for entry in $trees; do
  name=${entry%%=*} dir=${entry#*=}
  # A tree from before lab/ existed has the binary in tests/.
  for d in lab tests; do [ -x "build-$name/$d/ferry_small_reads" ] && binary[$name]=build-$name/$d/ferry_small_reads; done
  if [ -z "${binary[$name]:-}" ]; then
    [ -d "$dir" ] || { echo "no $dir to build the $name tree's ferry_small_reads from"; exit 1; }
    targets=ferry_small_reads; [ "$name" = old ] && targets="ferry_small_reads ferry_cli ferry_bench"
    # shellcheck disable=SC2086
    cmake -S "$dir" -B "build-$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      > "$out/$name-cmake.log" 2>&1 && cmake --build "build-$name" -j "$(nproc)" --target $targets \
      > "$out/$name-build.log" 2>&1 || { tail -20 "$out/$name-build.log"; exit 1; }
    for d in lab tests; do [ -x "build-$name/$d/ferry_small_reads" ] && binary[$name]=build-$name/$d/ferry_small_reads; done
  fi
  names+=("$name")
done
file=$build/data/small-4GiB.bin
[ -f "$file" ] || { "$build/cli/ferry" write "$file" --size 4GiB --no-sync > /dev/null && sync; }
hot=${HOT_ARGS:---sizes 4KiB,64KiB,1MiB --bytes-per-mode 512MiB}
cold=${COLD_ARGS---sizes 4KiB,64KiB --bytes-per-mode 64MiB --modes raw-host,plain,ferry,ferry-mt,batch}
# passes CACHE ARGS ROUNDS: every other tree, then this one, ROUNDS times
passes() {
  for round in $(seq "$3"); do
    [ "$1" = hot ] && cat "$file" > /dev/null
    for which in "${names[@]}" new; do
      echo "== $1, $which, round $round"
      # shellcheck disable=SC2086
      "${binary[$which]}" "$file" --cache "$1" $2 --json-out "$out/$1-$which-$round.json" 2>&1 | tee "$out/$1-$which-$round.txt"
    done
  done
}
passes hot "$hot" "$rounds"
[ -z "$cold" ] || passes cold "$cold" "$cold_rounds"
python3 "$(dirname "$0")/small_reads_ab_summary.py" "$out" | tee "$out/summary.txt"
