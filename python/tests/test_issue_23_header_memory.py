"""Issue 23, Medium 1 (its second half): what shards claim does not drive allocations before bytes arrive.

40 shards each claim a header of almost 100 MB (sparse files, so the claims are within the files' sizes)
and hold zeros there. Opening the index must fail on the first bad header without having held every
shard's claimed header at once: at d7cbac4 the loader resized 40 buffers of 100 MB before reading any
(4 GB resident); now the texts are read a group of at most 256 MiB at a time."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

CLAIM = 99 * 1000 * 1000


def test_forty_shards_claiming_huge_headers_stay_within_the_budget(tmp_path: Path):
    weight_map = {}
    for i in range(40):
        name = f"model-{i + 1:05d}-of-00040.safetensors"
        with open(tmp_path / name, "wb") as f:
            f.write(struct.pack("<Q", CLAIM))
            f.truncate(8 + CLAIM + 64)  # sparse: the claim fits the file, its bytes are zeros
        weight_map[f"t{i}"] = name
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    child = (
        "import sys, ferry.safetensors as st\n"
        "try:\n"
        "    st.load_file(sys.argv[1], device='cpu')\n"
        "    print('LOADED')\n"
        "except Exception as e:\n"
        "    print('ERROR', type(e).__name__, str(e)[:200])\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "print('HWM_KB', hwm)\n"
    )
    out = subprocess.run([sys.executable, "-c", child, str(tmp_path / "model.safetensors.index.json")],
                         capture_output=True, text=True, timeout=50)
    lines = out.stdout.split("\n")
    assert any(line.startswith("ERROR") for line in lines), out.stdout + out.stderr
    hwm_mb = int(next(line for line in lines if line.startswith("HWM_KB")).split()[1]) / 1024
    assert hwm_mb < 1024, f"opening held {hwm_mb:.0f} MB for headers that claimed 40 x 99 MB"
