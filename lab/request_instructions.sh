#!/usr/bin/env bash
# What one small request costs in instructions, all threads together (callgrind), on the fake GPU and into host
# memory: 4 KiB reads one at a time, and 64 in flight from one thread. Also the driver calls a request makes on
# the fake GPU (each a call into the real driver on a GPU machine). Deterministic where timings on the 2-core CPU
# machine are not: compare builds with it, then time them on the GPU.
#   lab/request_instructions.sh BUILD_DIR     (a Release build with -g of ferry_submit_profile; needs valgrind)
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR}
out=$(mktemp -d)
requests=20000
total=$((requests + 2000))  # ferry_submit_profile warms up with 2,000 requests first
per_request() {  # per_request NAME ARGS...: instructions a request in File::pread, Future::get and the pool's workers
  local name=$1; shift
  valgrind --tool=callgrind --callgrind-out-file="$out/$name.cg" "$build/lab/ferry_submit_profile" "$@" \
    > "$out/$name.log" 2>&1
  callgrind_annotate --inclusive=yes --threshold=100 "$out/$name.cg" > "$out/$name.txt" 2>/dev/null
  python3 - "$out/$name.txt" "$name" "$total" <<'PY'
import re, sys
text, name, total = open(sys.argv[1]).read().splitlines(), sys.argv[2], int(sys.argv[3])
def inclusive(function):
    return max((int(l.split()[0].replace(",", "")) for l in text if function in l and "[" in l), default=0)
parts = {"pread": inclusive("ferry::File::pread(void*, unsigned long, unsigned long) ["),
         "get": inclusive("ferry::Future::get() ["), "workers": inclusive("ThreadPool::worker_loop() [")}
row = "  ".join(f"{k} {v / total:6.0f}" for k, v in parts.items())
print(f"{name:10s} {row}  all {sum(parts.values()) / total:6.0f}")
PY
}
echo "instructions a request ($requests requests after 2,000 to warm up; 2 workers)"
per_request one-gpu "$requests" 1 2 1 fake-gpu
per_request inflight "$requests" 64 2 1 fake-gpu
per_request one-host "$requests" 1 2 1 host
echo "driver calls a request, one at a time on the fake GPU (the submitting thread has no current context)"
callgrind_annotate --threshold=100 --tree=calling "$out/one-gpu.cg" 2>/dev/null | python3 -c "
import collections, re, sys
calls = collections.Counter()
for line in sys.stdin:
    m = re.search(r'>   .*::fake_(cu[A-Z]\w+)\(.*\((\d[\d,]*)x\)', line)
    if m: calls[m.group(1)] += int(m.group(2).replace(',', ''))
print('  ' + ', '.join(f'{k} {v / $total:.2f}' for k, v in calls.most_common() if v >= $total // 10))
"
rm -rf "$out"
