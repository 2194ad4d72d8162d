# Run on the same machine right after call.sh (it was still warm), as two device commands:
source .device-deps/gpu-env.sh; HOT_ARGS="--sizes 4KiB,64KiB --bytes-per-mode 128MiB --modes ferry,ferry-mt,plain" COLD_ARGS="" timeout 150 bench/small_reads_ab.sh $OUT/ab2 2 > $OUT/ab2.log 2>&1
source .device-deps/gpu-env.sh; GOALS_PASSES=2 timeout 160 scripts/gpu-session.sh small-reads-goals > $OUT/goals.log 2>&1
# (goals.txt here is the verdict block of that second command's output; the device returned only some files)
