#!/usr/bin/env python3
"""The read path's folders of src/ include only downward (issue 24): each folder's level is below, and no
file includes a folder at a higher level. file -> route -> engine -> backends -> sources -> platform, with
the vocabulary (base, config, report) beneath everything, and the loaders (safetensors, doctor) on top. The
public ferry/ headers may be included anywhere. The programs' support library (cli/support) is outside src/
and not checked here (tests/cli/include_rule_test.sh checks what cli/ includes).

    python3 tests/layers/check_layers.py [SOURCE_ROOT]
"""

import re
import sys
from pathlib import Path

# Higher numbers sit above lower ones; a folder may include its own level's folder and any lower one.
LEVELS = {
    "base": 0, "config": 0, "report": 0,
    "platform": 1,
    "source": 2,
    "remote": 3,  # a source over HTTP and S3: it builds on the seam of source/
    "backends": 4,
    "engine": 5,
    "route": 6,
    "file": 7,
    "safetensors": 8, "doctor": 8,
}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([a-z_]+)/')


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]) / "src"
    bad, checked = [], 0
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".cpp", ".hpp", ".h", ".in") or path.parent == root:
            continue
        folder = path.relative_to(root).parts[0]
        if folder not in LEVELS:
            bad.append(f"{path.relative_to(root)}: folder {folder!r} has no level in tests/layers/check_layers.py")
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) == "ferry":
                continue
            checked += 1
            target = m.group(1)
            if target not in LEVELS:
                bad.append(f"src/{path.relative_to(root)}:{number}: includes {target}/, which is no folder of src/")
            elif LEVELS[target] > LEVELS[folder]:
                bad.append(f"src/{path.relative_to(root)}:{number}: {folder}/ (level {LEVELS[folder]}) includes "
                           f"{target}/ (level {LEVELS[target]}), which sits above it")
    for line in bad:
        print("FAIL:", line)
    if checked == 0:
        print(f"FAIL: no #include found under {root}")
        return 1
    if not bad:
        print(f"ok: {checked} #include lines under src/ run downward by folder")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
