#!/usr/bin/env python3
"""Builds the Python source distribution (sdist) of Ferry, or lists what it would hold.

With scikit-build-core importable, its own PEP 517 hook builds the sdist (`--backend auto`, the default), so
the file is exactly what `pip` and `python -m build` would make. Without it (Debian 12 packages no
scikit-build-core), this script selects the files the way scikit-build-core documents for its sdists and
writes the archive itself: every file git would track (not ignored by .gitignore; from `git ls-files
--cached --others --exclude-standard`), less the pyproject's `sdist.exclude` patterns, plus its
`sdist.include` patterns, with a PKG-INFO. Patterns are gitignore-style: a leading "/" anchors at the root,
a pattern without "/" matches a name at any depth.

Usage: make_sdist.py [--backend auto|scikit-build-core|own] [--list] OUTDIR
Prints the path of the archive it wrote (or, with --list, the files, one a line).
"""
import argparse
import fnmatch
import io
import os
import subprocess
import sys
import tarfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def matches(pattern, path):
    """gitignore-style match of one pattern against a '/'-separated path relative to the root."""
    pattern = pattern.rstrip("/")
    anchored = pattern.startswith("/") or "/" in pattern
    pattern = pattern.lstrip("/")
    parts = path.split("/")
    if anchored:
        # The pattern names a path from the root: the file itself or one of its parent directories.
        return any(fnmatch.fnmatchcase("/".join(parts[:n]), pattern) for n in range(1, len(parts) + 1))
    return any(fnmatch.fnmatchcase(part, pattern) for part in parts)


def candidate_files():
    """Files git would track here (tracked, and untracked but not ignored); a walk where git is absent."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             check=True, capture_output=True).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(ROOT):
            dirnames[:] = [d for d in dirnames if d != ".git" and not d.startswith("build")]
            files += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in filenames]
    # A file listed by git but deleted in the working tree is not in the sdist.
    return sorted(f for f in files if os.path.isfile(os.path.join(ROOT, f)))


def select(pyproject):
    sdist = pyproject.get("tool", {}).get("scikit-build", {}).get("sdist", {})
    exclude, include = sdist.get("exclude", []), sdist.get("include", [])
    files = [f for f in candidate_files() if not any(matches(p, f) for p in exclude)]
    for dirpath, _, filenames in os.walk(ROOT):
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
            if rel not in files and any(matches(p, rel) for p in include):
                files.append(rel)
    return sorted(files)


def pkg_info(project):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    return ("\n".join(lines) + "\n").encode()


def build_own(pyproject, outdir):
    project = pyproject["project"]
    base = f"{project['name']}-{project['version']}"
    path = os.path.join(outdir, base + ".tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in select(pyproject):
            tar.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}", recursive=False)
        data = pkg_info(project)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
    return path


def build_with_backend(outdir):
    from scikit_build_core.build import build_sdist  # the PEP 517 hook pip would call
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return os.path.join(outdir, build_sdist(outdir))
    finally:
        os.chdir(cwd)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["auto", "scikit-build-core", "own"], default="auto")
    parser.add_argument("--list", action="store_true", help="list the files this script would pack, and exit")
    parser.add_argument("outdir", nargs="?", default="dist")
    args = parser.parse_args()
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    if args.list:
        print("\n".join(select(pyproject)))
        return 0
    outdir = os.path.abspath(args.outdir)
    os.makedirs(outdir, exist_ok=True)
    backend = args.backend
    if backend == "auto":
        try:
            import scikit_build_core.build  # noqa: F401
            backend = "scikit-build-core"
        except ImportError:
            backend = "own"
    path = build_with_backend(outdir) if backend == "scikit-build-core" else build_own(pyproject, outdir)
    print(f"{backend} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
