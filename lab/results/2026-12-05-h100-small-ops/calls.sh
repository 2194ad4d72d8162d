#!/usr/bin/env bash
# Written on 2026-12-05 when no device was lent; calls 1, 2 and 4 ran on an H100 later that day (outcome:
# bench/results/2026-12-05-h100-small-ops). Call 3 did not run.
# Each call is run from the repository root on the GPU machine with .device-deps and .old-tree (git archive
# 189e30e | tar -x -C .old-tree --exclude=bench/results --exclude=lab/results) carried; call 3 also carries
# .perf-closure (Debian 12's perf and the libraries it needs that Ubuntu 24.04 lacks:
#   mkdir -p .perf-closure/lib && cp /usr/bin/perf .perf-closure/ && ldd /usr/bin/perf | awk '{print $3}' |
#   grep -vE 'libc.so|libm.so|libstdc|libgcc_s|ld-linux|^$' | xargs -I{} cp -L {} .perf-closure/lib/).
#
# What they answer:
# 1. Does this tree pass on the GPU (C++ GPU tests and CPU tests there, the pinned budget's stresses within
#    64 MiB, the Python GPU tests)? The session of 2026-12-05 (afternoon) changed GPU paths it could not run:
#    staged_backend, gds_backend, staging_pool, stream_order (line cuts; an empty stream-ordered read counted).
#    The second session of 2026-12-05, also without a device, deleted an unreachable check in gds_backend and
#    made the process-wide singletons (CUDA, cuFile, contexts, staging pool, stream order) without static guards.
#    Call 1 the C++ side, call 4 the Python GPU tests and pip install (each call stays under 600 s).
# 2. Small reads from one thread: is the submitter slowed by how many drainers share small ops? With 64 reads in
#    flight a push starts drainers until each has kSmallOpsPerDrainer (4) of them: up to 16 drainers, all taking
#    the queue's one lock, each take a copy and a wait of its own. The one-thread rows are 0.45-0.58x of 189e30e,
#    the submitter's pread() 2.0 us against 1.0 and 0.37 voluntary context switches a read against 0.09 (a
#    contended lock is one such switch). Variants: p64 (one-pusher-64.patch: 64 small one-op reads to a drainer
#    where one thread pushes, 4 otherwise) and s64 (64 to a drainer always); old is 189e30e. On the CPU machine
#    (fake driver, 16 workers, one submitter) p64 took 2.3-2.5 us a read against 4.6-5.8, pread() 0.65 us
#    against 4.0-4.7, 0.014-0.017 pool jobs started a read against 0.24-0.25; 16 submitters unchanged
#    (bench/results/2026-12-05-cpu-no-device). Watch the 16-thread and batch rows: fewer drainers must not cost
#    them. If p64 wins on the H200, land the patch (and its comment) and drop s64.
# 3. Where one thread's 4 KiB read in flight spends its CPU, this tree against 189e30e (flat and per thread).
set -uo pipefail
source .device-deps/gpu-env.sh
export FERRY_BUILD_DIR=build-gpu
case "${1:-}" in
  1) scripts/gpu-bounded.sh "200:build 150:test 90:budget" ;;
  2) variant() {  # variant NAME: a copy of this tree (without builds, results or carried folders) in .v-NAME
       mkdir -p ".v-$1" && tar c --exclude=./build-gpu --exclude='./build-*' --exclude='./.v-*' --exclude=./.old-tree \
         --exclude=./.device-deps --exclude=./.perf-closure --exclude=./bench/results --exclude=./lab/results . |
         tar x -C ".v-$1"
     }
     variant s64 && sed -i "s/constexpr std::size_t kSmallOpsPerDrainer = 4;/constexpr std::size_t kSmallOpsPerDrainer = 64;/" \
       .v-s64/src/engine/queue.cpp && grep -q "kSmallOpsPerDrainer = 64;" .v-s64/src/engine/queue.cpp || exit 1
     # one-pusher-64.patch, applied without patch(1) (the machine may lack it): its one changed line, replaced.
     variant p64 && python3 - .v-p64/src/engine/queue.cpp lab/results/2026-12-05-h100-small-ops/one-pusher-64.patch <<'PY' || exit 1
import sys
source, diff = open(sys.argv[1]).read(), open(sys.argv[2]).read().splitlines()
old = "\n".join(l[1:] for l in diff if l.startswith("-") and not l.startswith("---")) + "\n"
new = "\n".join(l[1:] for l in diff if l.startswith("+") and not l.startswith("+++")) + "\n"
assert source.count(old) == 1, "the line the patch changes is not in the tree"
open(sys.argv[1], "w").write(source.replace(old, new))
PY
     # Every tree's probe at once, 4 jobs each (small_reads_ab.sh would build them one after another); this
     # tree's only where call 1 did not run on this machine.
     build() {  # build DIR SOURCE NAME TARGETS...
       local dir=$1 source=$2 name=$3; shift 3
       cmake -S "$source" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=OFF -DFERRY_REMOTE=OFF \
         > "build-gpu/out/$name-cmake.log" 2>&1 && cmake --build "$dir" -j 4 --target "$@" > "build-gpu/out/$name-build.log" 2>&1
     }
     mkdir -p build-gpu/out
     [ -x build-gpu/lab/ferry_small_reads ] || build build-gpu . new ferry_small_reads ferry_cli &
     build build-old .old-tree old ferry_small_reads ferry_cli ferry_bench &
     build build-p64 .v-p64 p64 ferry_small_reads &
     build build-s64 .v-s64 s64 ferry_small_reads &
     wait
     TREES="old=.old-tree p64=.v-p64 s64=.v-s64" \
       HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 512MiB --modes ferry,ferry-mt,ferry-1,plain,batch" \
       COLD_ARGS="" timeout 420 lab/small_reads_ab.sh build-gpu/out/ab 2 0 > build-gpu/out/ab.txt 2>&1
     cp build-gpu/out/ab.txt "$OUT/" 2>/dev/null; tar czf "$OUT/out.tgz" -C build-gpu/out . ;;
  3) # The perf call of the linger session, which did not run there: both probes built side by side, then a flat
     # profile and one by thread of each.
     bash lab/results/2026-12-05-h200-linger/calls.sh 3 ;;
  4) scripts/gpu-bounded.sh "$( [ -x build-gpu/tests/ferry_gpu_tests ] || echo 200:build ) 280:pytest-gpu 90:pip" ;;
  *) echo "usage: $0 1|2|3|4"; exit 2 ;;
esac
