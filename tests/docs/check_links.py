#!/usr/bin/env python3
"""Every relative link of the project's Markdown leads somewhere: to a file or folder that exists and, for a
link into a Markdown file with a #fragment, to one of its headings (as GitHub names them: lower case, spaces
as hyphens, punctuation dropped, "-1", "-2" for repeats).

    check_links.py ROOT      (ctest: docs.links)

Skips folders of builds, dependencies and tools (build*, node_modules, dot-folders) and links inside code
fences; URLs with a scheme (https:, mailto:) are not followed.
"""

import os
import re
import sys
from pathlib import Path

LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#+)\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(path: Path):
    """The lines of `path` outside code fences."""
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield line


def heading_ids(path: Path) -> set:
    ids, seen = set(), {}
    for line in prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        base = re.sub(r"[^\w\- ]", "", m.group(2).replace("`", "").lower()).replace(" ", "-")
        count = seen.get(base, 0)
        seen[base] = count + 1
        ids.add(base if count == 0 else f"{base}-{count}")
    return ids


def markdown_files(root: Path):
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (d.startswith(".") or d.startswith("build") or d == "node_modules")]
        for name in files:
            if name.endswith(".md"):
                yield Path(folder) / name


def main() -> int:
    root = Path(sys.argv[1]).resolve()
    broken, headings = [], {}
    for md in sorted(markdown_files(root)):
        for number, line in enumerate(prose_lines(md), 1):
            for target in LINK.findall(line):
                if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
                    continue
                path, _, fragment = target.partition("#")
                dest = (md.parent / path).resolve() if path else md
                where = f"{md.relative_to(root)}: ({target})"
                if not dest.exists():
                    broken.append(f"{where}: no such file")
                elif fragment and dest.suffix == ".md":
                    if dest not in headings:
                        headings[dest] = heading_ids(dest)
                    if fragment not in headings[dest]:
                        broken.append(f"{where}: no heading #{fragment} in {dest.relative_to(root)}")
    for line in broken:
        print(line)
    print(f"{'ok' if not broken else 'FAILED'}: {len(broken)} broken relative link(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
