#!/bin/bash
# Call F3 of 2026-12-03: branch x-grace (26a57b2 = bf5e86a, help_own, plus switches): the grace period,
# help_own and an adaptive grace by environment, alternating, two rounds; then issue 21's goals in three passes (defaults).
set -u
source .device-deps/gpu-env.sh
b=build-gpu; o=$b/out; mkdir -p $o $b/data
log() { echo "== $(date -u +%T) $*"; }
log start
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $o/machine.txt; nproc >> $o/machine.txt
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF > $o/cmake.log 2>&1 &&
  cmake --build $b -j 16 --target ferry_cli ferry_small_reads ferry_copy_contention > $o/build.log 2>&1; echo "build rc=$?"
log built
f=$b/data/small-4GiB.bin
$b/cli/ferry write $f --size 4GiB --no-sync > /dev/null && sync; cat $f > /dev/null
sr=$b/tests/ferry_small_reads
for round in 1 2; do
  for v in base g200 g1000 nohelp-g1000 adapt; do
    env=(); case $v in g200) env=(FERRY_X_GRACE_US=200);; g1000) env=(FERRY_X_GRACE_US=1000);;
      nohelp-g1000) env=(FERRY_X_NO_HELP=1 FERRY_X_GRACE_US=1000);; adapt) env=(FERRY_X_ADAPT=1);; esac
    modes=ferry,ferry-mt,ferry-1; [ $v = base ] && modes=$modes,plain
    env "${env[@]}" timeout 60 $sr $f --modes $modes --sizes 4KiB,64KiB --bytes-per-mode 512MiB \
      --json-out $o/v-$v-$round.json > $o/v-$v-$round.txt 2>&1 || echo "exit $? $v"
    echo "r$round $v: $(grep -E '^[0-9.]+ [KM]iB' $o/v-$v-$round.txt | awk '{print $1$2, $3, ($3=="ferry-1" ? $7 : $5)}' | tr '\n' ';')"
  done
done
log variants done
GOALS_PASSES=3 FERRY_BUILD_DIR=$b timeout 330 scripts/gpu-session.sh small-reads-goals 2>&1 | tail -24
log end
tar czf $OUT/f3.tgz -C $b out
