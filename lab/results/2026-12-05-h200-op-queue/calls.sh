#!/usr/bin/env bash
# The four device calls of 2026-12-05 (bench/results/2026-12-05-h200-op-queue), each run from the repository
# root on the GPU machine with .device-deps and .old-tree (git archive 189e30e) carried, and .v-prev
# (git archive 3bf6b75) and .v-expedite (git archive x-expedite) travelling as untracked folders.
set -uo pipefail
source .device-deps/gpu-env.sh
case "${1:-}" in
  1) scripts/gpu-bounded.sh "180:build 140:test 100:budget 150:stream-order" ;;
  2) export FERRY_BUILD_DIR=build-gpu
     scripts/gpu-bounded.sh "170:pytest-gpu"
     TREES="old=.old-tree prev=.v-prev" HOT_ARGS="--sizes 4KiB,64KiB,1MiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,plain-1,batch" \
       COLD_ARGS="" timeout 380 lab/small_reads_ab.sh build-gpu/out/ab 1 0 > build-gpu/out/ab.txt 2>&1 ;;
  3) export FERRY_BUILD_DIR=build-gpu
     # .v-ng: this tree with the submitter's grace period set to 0
     mkdir -p .v-ng && tar c --exclude=./build-gpu --exclude=./build-old --exclude=./build-prev --exclude='./.v-*' \
       --exclude=./.old-tree --exclude=./.device-deps --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-ng
     sed -i 's/kSubmitterRunsGrace{50}/kSubmitterRunsGrace{0}/' .v-ng/src/engine/request.cpp
     TREES="expedite=.v-expedite nograce=.v-ng" HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,batch" \
       COLD_ARGS="" timeout 420 lab/small_reads_ab.sh build-gpu/out/ab2 2 0 > build-gpu/out/ab2.txt 2>&1 ;;
  4) scripts/gpu-bounded.sh "180:build 200:small-reads-goals"
     OLD_TREE=.old-tree NR_ROUNDS=2 scripts/gpu-bounded.sh "400:no-regression" ;;
esac
