#!/usr/bin/env bash
# One bounded GPU call: build the Python module with debug info, run each save case in a fresh process
# with segv_backtrace preloaded, and turn the frames into functions and lines.
set -uo pipefail
source .device-deps/gpu-env.sh
here=lab/chase
python=$(command -v python3)
log() { echo "== $(date +%T) $*"; }
log build
cmake -S . -B build-dbg -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_BUILD_PYTHON=ON -DFERRY_REMOTE=OFF \
  -DFERRY_BUILD_TESTS=OFF -DPython_EXECUTABLE="$python" -Dpybind11_DIR="$($python -m pybind11 --cmakedir)" \
  > "$OUT/cmake.log" 2>&1 || tail -20 "$OUT/cmake.log"
cmake --build build-dbg -j 16 --target _ferry > "$OUT/build.log" 2>&1 || { grep -m20 error "$OUT/build.log"; exit 1; }
gcc -shared -fPIC -O1 -o build-dbg/segv_backtrace.so $here/segv_backtrace.c
log cases
PYTHONPATH=build-dbg/python LD_PRELOAD=$PWD/build-dbg/segv_backtrace.so timeout 120 $python $here/sharded_gpu_save.py \
  2>&1 | tee "$OUT/cases.log"
log frames
grep -oE '[^ ()]+\.so[^ (]*\(\+0x[0-9a-f]+\)' "$OUT/cases.log" | sort -u | while read -r f; do
  lib=${f%%(*}; off=${f##*(+}; off=${off%)}
  printf '%s %s: ' "$(basename "$lib")" "$off"; addr2line -f -C -i -p -e "$lib" "$off" 2>/dev/null | head -3 | tr '\n' ' '; echo
done | grep -v '?? ' | tee "$OUT/frames.log"
if [ "${CHASE_TESTS:-0}" = 1 ]; then
  log "python/tests/test_safetensors_save_gpu.py"
  PYTHONPATH=build-dbg/python timeout 60 $python -m pytest python/tests/test_safetensors_save_gpu.py -q -rs \
    -p no:cacheprovider 2>&1 | tail -25 | tee "$OUT/save-gpu-tests.log"
fi
