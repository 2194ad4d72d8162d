#!/usr/bin/env bash
# Ran 2026-12-07 at ec3b8a3 as bench/results/2026-12-07-h100-batch-steal with ROUNDS_UNTIL=190 (it was written as lab/results/pending-batch-steal).
# Written 2026-12-07 on the CPU machine. Carry .device-deps and .old-tree (git archive 189e30e). Settles the open
# question of 2026-12-07-h100-final-goals: four of the tree's twelve batch runs fell to 20-37 GB/s on a noisy host,
# none of 189e30e's, whose build prints no steal. Here both trees' batch rows (64 KiB and 1 MiB pieces in 64 and
# 256 MiB batches) alternate for up to eight rounds, and the script itself reads the machine's steal (/proc/stat,
# all CPUs) and the process's CPU time around every run, so a low run of either tree can be told from a busy host.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/bs"; mkdir -p "$o"
start=$(date +%s)
{ nvidia-smi -L; nproc; uname -r; getconf CLK_TCK; } > "$o/machine.txt" 2>&1
f=big-8GiB.bin
( [ -f $f ] || head -c 8G /dev/urandom > $f ) &
for t in tree:. old:.old-tree; do
  IFS=: read -r name dir <<< "$t"
  ( cmake -S "$dir" -B "build-g$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
      -DFERRY_BUILD_TESTS=ON > "$o/$name-cmake.log" 2>&1 &&
    cmake --build "build-g$name" -j 8 --target ferry_small_reads > "$o/$name-build.log" 2>&1 ||
    tail -20 "$o/$name-build.log" ) &
done
wait
sync
cat $f > /dev/null
echo "built and file ready after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
sr() { find "build-g$1" -name ferry_small_reads -type f | head -1; }
steal_ticks() { awk '/^cpu /{print $9}' /proc/stat; }
# run NAME ARGS...: one run into $o/NAME.txt, then its steal (ticks of 1/CLK_TCK s, all CPUs) and CPU time.
run() {
  local name=$1; shift
  local before; before=$(steal_ticks)
  local TIMEFORMAT="time: wall %R s, user %U s, sys %S s"
  { time timeout 60 "$@" > "$o/$name.txt" 2>&1; } 2>> "$o/$name.txt"
  echo "steal: $(( $(steal_ticks) - before )) ticks" >> "$o/$name.txt"
}
for round in 1 2 3 4 5 6 7 8; do
  order="old tree"; [ $((round % 2)) = 0 ] && order="tree old"
  for t in $order; do
    [ $(( $(date +%s) - start )) -gt ${ROUNDS_UNTIL:-360} ] && break 2
    run "$t-b64-$round" "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 64MiB --bytes-per-mode 2GiB
    run "$t-b256-$round" "$(sr $t)" $f --sizes 64KiB,1MiB --modes batch --batch-bytes 256MiB --bytes-per-mode 4GiB
  done
done
echo "done after $(( $(date +%s) - start )) s" >> "$o/machine.txt"
tar czf "$OUT/bs.tgz" -C "$o" .
# One line a run: GB/s of 64 KiB and 1 MiB pieces, steal ticks, CPU seconds.
for r in "$o"/*-b*.txt; do
  printf '%s %s steal %s cpu %s\n' "$(basename "$r" .txt)" "$(awk '/ batch /{printf "%s ", $5}' "$r")" \
    "$(awk '/^steal:/{print $2}' "$r")" "$(awk '/^time:/{gsub(",",""); print $6+$9}' "$r")"
done
