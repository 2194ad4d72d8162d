#!/bin/bash
# Call B1 of 2026-12-03 (untracked; branch x-dispatch at 6ea71f0): where a submission's time goes
# (FERRY_X_PHASES), and the safetensors no-regression A/B against d7cbac4 (.old-d7), fresh processes, alternating.
set -u
source .device-deps/gpu-env.sh
o=build-gpu/out; mkdir -p $o
py=$(command -v python3)
pbd=$($py -m pybind11 --cmakedir)
( cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=ON -DFERRY_REMOTE=OFF -DPython_EXECUTABLE=$py -Dpybind11_DIR=$pbd > $o/cmake.log 2>&1 &&
  cmake --build build-gpu -j 10 --target ferry_small_reads ferry_cli ferry_bench _ferry ferry_python_package > $o/build.log 2>&1 ) &
( cmake -S .old-d7 -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=ON -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_CLI=OFF -DFERRY_REMOTE=OFF -DPython_EXECUTABLE=$py -Dpybind11_DIR=$pbd > $o/old-cmake.log 2>&1 &&
  cmake --build build-old -j 6 > $o/old-build.log 2>&1 ) &
wait
sr=build-gpu/tests/ferry_small_reads
mkdir -p build-gpu/data; f=build-gpu/data/small-4GiB.bin
[ -f $f ] || build-gpu/cli/ferry write $f --size 4GiB --no-sync > /dev/null
cat $f > /dev/null
for round in 1 2; do for size in 4KiB 64KiB; do for mode in ferry ferry-1 ferry-mt; do
  FERRY_X_PHASES=1 timeout 40 $sr $f --sizes $size --bytes-per-mode 512MiB --modes $mode > $o/phases-$mode-$size-$round.txt 2>&1
done; done; done
st=build-gpu/data/st; mkdir -p $st
PYTHONPATH=build-gpu/python FERRY_BENCH_DATA=$st timeout 240 $py bench/safetensors_bench.py --hot-runs 1 --cold-runs 0 --ferry-cli build-gpu/cli/ferry --out $o > $o/st-bench.log 2>&1
ck=$st/bench-model.safetensors
child() {  # child WHICH CACHE ROUND: one fresh-process load by `bench/safetensors_bench.py --child ferry`
  local pp=build-gpu/python; [ $1 = old ] && pp=build-old/python
  [ $2 = cold ] && $py -c "import sys; sys.path.insert(0, 'bench'); import safetensors_bench as b; from pathlib import Path; b.evict(Path('$ck'))" > /dev/null
  PYTHONPATH=$PWD/$pp timeout 60 $py bench/safetensors_bench.py --child ferry $ck 2>&1 | tail -1 | sed "s/^/{\"which\":\"$1\",\"cache\":\"$2\",\"round\":$3,\"line\":/; s/\$/}/" >> $o/st-ab.jsonl
}
cat $ck > /dev/null
for r in 1 2 3; do for w in old new; do child $w hot $r; done; done
for r in 1 2; do for w in old new; do child $w cold $r; done; done
tar czf $OUT/rB1.tgz -C build-gpu out
