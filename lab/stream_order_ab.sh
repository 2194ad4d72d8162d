#!/usr/bin/env bash
# On the GPU machine, after the build step (build-gpu): read_async against pread, alternating between a base
# tree and this one. The base is what .base-tree holds (`git archive REV | tar x -C .base-tree` here, then
# carry .base-tree); its Python module is built in build-base. Results go to $OUT.
set -uo pipefail
python=$(command -v python3)
pybind=$($python -m pybind11 --cmakedir)
cmake -S .base-tree -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_PYTHON=ON -DFERRY_BUILD_TESTS=OFF \
  -DFERRY_BUILD_CLI=OFF -DFERRY_REMOTE=OFF -DPython_EXECUTABLE="$python" -Dpybind11_DIR="$pybind" > /dev/null 2>&1
cmake --build build-base -j 16 > $OUT/base-build.log 2>&1 || { tail -20 $OUT/base-build.log; }
export FERRY_CLI=$PWD/build-gpu/cli/ferry
for round in 1 2; do
  for which in base new; do
    py=build-gpu/python; [ $which = base ] && py=build-base/python
    echo "== $which round $round"
    PYTHONPATH=$py timeout 120 $python bench/stream_order_bench.py --dir build-gpu/data --sizes 1GiB,8GiB --repeats 3 \
      --json-out $OUT/so-$which-$round.json 2>&1 | grep -v overlap
  done
done
for env in FERRY_BOUNCE_BUFFERS_PER_THREAD=4 FERRY_THREADS=32; do
  echo "== new $env"
  env $env PYTHONPATH=build-gpu/python timeout 120 $python bench/stream_order_bench.py --dir build-gpu/data --sizes 8GiB \
    --repeats 3 --json-out $OUT/so-new-$env.json 2>&1 | grep -v overlap
done
