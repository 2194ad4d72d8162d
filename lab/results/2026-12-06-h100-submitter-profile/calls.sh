#!/usr/bin/env bash
# Written 2026-12-06 on the CPU machine (it ran as lab/results/pending-submitter-profile). Carry .device-deps and .perf-deps (Debian's perf, its libraries and
# libglib2.0-0, unpacked here). Where the submitting thread's 1.8-1.9 us a 4 KiB request go on this tree
# (bench/results/2026-12-06-h100-fewer-touches), and a one-at-a-time read's 2 us over the plain loop
# (2026-12-06-h100-goals-and-spread): ferry_small_reads built with frame pointers, profiled (cpu-clock, 20 kHz,
# call graphs) for one thread's 4 KiB reads in flight and for 4 KiB reads one at a time; the reports keep to the
# main thread (its thread id is the process id). About 3 minutes after the machine's start.
set -uo pipefail
source .device-deps/gpu-env.sh
o="$OUT/prof"; mkdir -p "$o"
{ nvidia-smi -L; nproc; uname -r; grep -c uses_begun src/file/file_state.hpp; } > "$o/machine.txt" 2>&1
mkdir -p /tmp/pd && for d in .perf-deps/*.deb; do dpkg -x "$d" /tmp/pd; done
perf() { LD_LIBRARY_PATH=/tmp/pd/usr/lib/x86_64-linux-gnu:/tmp/pd/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} /tmp/pd/usr/bin/perf "$@"; }
f=small-2GiB.bin
( [ -f $f ] || head -c 2G /dev/urandom > $f ) &
fp="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"
cmake -S . -B build-fp -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
  -DCMAKE_CXX_FLAGS="$fp" > "$o/cmake.log" 2>&1 && cmake --build build-fp -j 16 --target ferry_small_reads > "$o/build.log" 2>&1 || exit 1
wait
cat $f > /dev/null
sr=$(find build-fp -name ferry_small_reads -type f | head -1)
pack() { tar czf "$OUT/prof.tgz.part" -C "$o" . && mv "$OUT/prof.tgz.part" "$OUT/prof.tgz"; }
for t in in-flight:"--modes ferry --bytes-per-mode 512MiB" one:"--modes ferry-1 --bytes-per-mode 64MiB --latency-requests 20000"; do
  name=${t%%:*}; args=${t#*:}
  # shellcheck disable=SC2086
  perf record -e cpu-clock -F 20000 -g -o "/tmp/$name.data" -- "$sr" $f --sizes 4KiB $args > "$o/$name-rows.txt" 2>&1
  perf script -i "/tmp/$name.data" -F tid 2>/dev/null | sort | uniq -c | sort -rn | head -20 > "$o/$name-samples-by-thread.txt"
  main=$(awk 'NR==1{print $2}' "$o/$name-samples-by-thread.txt")
  perf report -i "/tmp/$name.data" --tid "$main" --no-children --sort dso,sym --stdio -g none --percent-limit 0.2 \
    2>/dev/null | head -120 > "$o/$name-main-flat.txt"
  perf report -i "/tmp/$name.data" --tid "$main" --children --sort sym --stdio -g none --percent-limit 0.5 2>/dev/null \
    | head -150 > "$o/$name-main-inclusive.txt"
  perf report -i "/tmp/$name.data" --tid "$main" --no-children --sort sym --stdio -g caller,0.5,callee,function,percent \
    --percent-limit 1 2>/dev/null | head -600 > "$o/$name-main-callers.txt"
  pack
done
