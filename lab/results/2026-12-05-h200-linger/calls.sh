#!/usr/bin/env bash
# The device calls of bench/results/2026-12-05-h200-linger, each run from the repository root on the GPU machine
# with .device-deps and .old-tree (git archive 189e30e) carried (call 2: and .perf-closure, Debian 12's perf with
# the libraries it needs that Ubuntu 24.04 lacks: mkdir -p .perf-closure/lib && cp /usr/bin/perf .perf-closure/ &&
# ldd /usr/bin/perf | awk '{print $3}' | grep -vE 'libc.so|libm.so|libstdc|libgcc_s|ld-linux|^$' |
# xargs -I{} cp -L {} .perf-closure/lib/), and .v-main (git archive 7def7d1) travelling as an untracked folder.
set -uo pipefail
source .device-deps/gpu-env.sh
export FERRY_BUILD_DIR=build-gpu
case "${1:-}" in
  1) scripts/gpu-bounded.sh "200:build"
     # .v-lng: this tree with the submitter's grace period set to 0
     mkdir -p .v-lng && tar c --exclude=./build-gpu --exclude='./build-*' --exclude='./.v-*' --exclude=./.old-tree \
       --exclude=./.device-deps --exclude=./bench/results --exclude=./lab/results . | tar x -C .v-lng
     sed -i 's/kSubmitterRunsGrace{50}/kSubmitterRunsGrace{0}/' .v-lng/src/engine/request.cpp
     TREES="old=.old-tree main=.v-main lng=.v-lng" \
       HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,batch" \
       COLD_ARGS="" timeout 300 lab/small_reads_ab.sh build-gpu/out/ab 2 0 > build-gpu/out/ab.txt 2>&1
     if command -v perf > /dev/null; then
       for t in new:build-gpu main:build-main; do
         timeout 40 perf record -g -o "build-gpu/out/perf-${t%%:*}.data" "${t#*:}/lab/ferry_small_reads" \
           build-gpu/data/small-4GiB.bin --sizes 4KiB --modes ferry --bytes-per-mode 512MiB > /dev/null 2>&1
         timeout 60 perf report -i "build-gpu/out/perf-${t%%:*}.data" --stdio --no-children --percent-limit 0.7 \
           --sort dso,symbol -g none > "build-gpu/out/perf-${t%%:*}.txt" 2>&1
         rm -f "build-gpu/out/perf-${t%%:*}.data"
       done
     else
       echo "no perf on this machine" > build-gpu/out/perf.txt
     fi
     cp build-gpu/out/ab.txt "$OUT/" 2>/dev/null; tar czf "$OUT/out.tgz" -C build-gpu/out . ;;
  2) scripts/gpu-bounded.sh "200:build 150:test"
     TREES="old=.old-tree main=.v-main" \
       HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,plain-1,batch" \
       COLD_ARGS="" timeout 200 lab/small_reads_ab.sh build-gpu/out/ab2 2 0 > build-gpu/out/ab2.txt 2>&1
     # Where a 4 KiB read in flight from one thread spends its CPU: perf (Debian's, carried in .perf-closure with
     # its libraries), flat, each build in turn.
     for t in new:build-gpu/lab old:build-old/tests; do
       LD_LIBRARY_PATH=.perf-closure/lib:$LD_LIBRARY_PATH timeout 40 .perf-closure/perf record -F 4999 -o "build-gpu/out/perf-${t%%:*}.data" \
         "${t#*:}/ferry_small_reads" build-gpu/data/small-4GiB.bin --sizes 4KiB --modes ferry --bytes-per-mode 1GiB \
         > "build-gpu/out/perf-${t%%:*}-run.txt" 2>&1
       LD_LIBRARY_PATH=.perf-closure/lib:$LD_LIBRARY_PATH timeout 40 .perf-closure/perf report -i "build-gpu/out/perf-${t%%:*}.data" --stdio \
         --no-children --percent-limit 0.4 --sort dso,symbol > "build-gpu/out/perf-${t%%:*}.txt" 2>&1
       LD_LIBRARY_PATH=.perf-closure/lib:$LD_LIBRARY_PATH timeout 40 .perf-closure/perf report -i "build-gpu/out/perf-${t%%:*}.data" --stdio \
         --no-children --sort tid > "build-gpu/out/perf-${t%%:*}-threads.txt" 2>&1
       rm -f "build-gpu/out/perf-${t%%:*}.data"
     done
     cp build-gpu/out/ab2.txt "$OUT/" 2>/dev/null; tar czf "$OUT/out.tgz" -C build-gpu/out . ;;
  3) # Call 2's perf step again (it had lost liburing's path): the two probes alone, built side by side.
     mkdir -p "$OUT/perf"
     for t in new:. old:.old-tree; do
       ( cmake -S "${t#*:}" -B "build-p${t%%:*}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF \
           -DFERRY_REMOTE=OFF > /dev/null 2>&1 && cmake --build "build-p${t%%:*}" -j 8 --target ferry_small_reads \
           > "$OUT/perf/${t%%:*}-build.log" 2>&1 ) &
     done
     wait
     head -c 2G /dev/urandom > small-2GiB.bin
     for t in new:build-pnew/lab old:build-pold/tests; do
       LD_LIBRARY_PATH=.perf-closure/lib:$LD_LIBRARY_PATH timeout 40 .perf-closure/perf record -F 4999 -o "perf-${t%%:*}.data" \
         "${t#*:}/ferry_small_reads" small-2GiB.bin --sizes 4KiB --modes ferry --bytes-per-mode 1GiB > "$OUT/perf/${t%%:*}-run.txt" 2>&1
       for sort in dso,symbol pid; do
         LD_LIBRARY_PATH=.perf-closure/lib:$LD_LIBRARY_PATH timeout 40 .perf-closure/perf report -i "perf-${t%%:*}.data" --stdio \
           --no-children --percent-limit 0.3 --sort $sort > "$OUT/perf/${t%%:*}-${sort%%,*}.txt" 2>&1
       done
     done ;;
esac
