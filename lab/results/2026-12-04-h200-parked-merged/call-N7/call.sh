#!/bin/bash
# Call N7 (2026-12-04): could hot 4 KiB pieces be read faster than a pread each? bench/tools/piece_read_probe.cpp
# on a hot 4 GiB file: pread, process_vm_readv of the file mapped (1,024 pieces a call), memcpy from the mapping,
# 8, 16 and 32 threads. No GPU: the read side alone (the 4 KiB batch goal is 4 M pieces/s with the copies).
set -u
log() { echo "== $(date -u +%T) $*"; }
log start
g++ -O2 -pthread -o /tmp/piece_read_probe bench/tools/piece_read_probe.cpp || exit 1
f=/tmp/probe-4GiB.bin
dd if=/dev/zero of=$f bs=16M count=256 status=none && cat $f > /dev/null
for t in 16 8 32 16; do /tmp/piece_read_probe $f $t 200000; done | tee $OUT/probe.txt
log end
