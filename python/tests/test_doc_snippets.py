"""Every Python snippet of README.md and python/README.md runs as written (issue 48): each document's ```python
blocks in order, in one fresh process whose working directory holds the files the snippets name
(shard.bin, tokens.bin, model.safetensors, checkpoint_dir/, llama/). A block's fence says what it needs
beyond this machine: ``gpu`` (a CUDA device, and CuPy where it imports it), ``multi-gpu`` (two),
``transformers``, ``process-group`` (run as torchrun would start one rank: MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE set), ``remote`` (an S3 store: here the S3-compatible server of tests/remote/s3rver on loopback,
named by AWS_ENDPOINT_URL as a user names such a store, with a bucket "bucket" of four shards). A block whose
needs are not met is skipped and named; on the GPU machine the gpu blocks run. Signature listings are
```text, not ```python."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest

import ferry
from ferry import safetensors as fst

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["README.md", "python/README.md"]
KNOWN_TAGS = {"gpu", "multi-gpu", "transformers", "process-group", "remote"}


def python_blocks(doc: Path) -> List[Tuple[int, List[str], str]]:
    """(first line, tags, code) of every ```python block."""
    out = []
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```python(.*)$", lines[i])
        if m:
            tags = m.group(1).split()
            start = i + 1
            i += 1
            while not lines[i].startswith("```"):
                i += 1
            out.append((start + 1, tags, "\n".join(lines[start:i]) + "\n"))
        i += 1
    return out


_RUNNER = r"""
import json, sys, traceback

def gpus():
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0

def importable(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False

def missing(tags, code):
    import os
    if "remote" in tags and not os.environ.get("AWS_ENDPOINT_URL"):
        return "needs an S3 store: " + os.environ.get("FERRY_DOC_NO_S3", "none")
    if "remote" in tags and not importable("dask"):
        return "needs dask"
    if "multi-gpu" in tags and gpus() < 2:
        return "needs two GPUs"
    if "gpu" in tags and gpus() < 1:
        return "needs a CUDA device"
    if "gpu" in tags and "import cupy" in code and not importable("cupy"):
        return "needs CuPy"
    if "transformers" in tags and not importable("transformers"):
        return "needs transformers"
    if "process-group" in tags and not importable("torch.distributed"):
        return "needs torch.distributed"
    return None

namespace = {"__name__": "__main__"}
for line, tags, code in json.load(open(sys.argv[1])):
    why = missing(tags, code)
    if why:
        print(json.dumps({"line": line, "status": "skipped", "why": why}), flush=True)
        continue
    try:
        exec(compile(code, f"{sys.argv[2]}:{line}", "exec"), namespace)
        print(json.dumps({"line": line, "status": "ran"}), flush=True)
    except BaseException:
        print(json.dumps({"line": line, "status": "failed", "error": traceback.format_exc()}), flush=True)
"""


def make_workspace(where: Path) -> None:
    """The files the snippets name, small."""
    rng = np.random.default_rng(48)
    rng.integers(0, 256, 64 << 20, dtype=np.uint8).tofile(where / "shard.bin")
    rng.integers(0, 50257, 1 << 20, dtype=np.uint16).tofile(where / "tokens.bin")
    tensors = {"model.embed_tokens.weight": rng.standard_normal((2048, 64)).astype(np.float32),
               "lm_head.weight": rng.standard_normal((2048, 64)).astype(np.float32),
               "model.layers.20.mlp.weight": rng.standard_normal((64, 64)).astype(np.float32)}
    fst.save_file(tensors, where / "model.safetensors", {"format": "pt"})
    fst.save_sharded(tensors, where / "checkpoint_dir", max_shard_size=600_000, metadata={"format": "pt"})
    try:
        import torch
        import transformers
    except ImportError:
        return
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=4)
    transformers.LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(where / "llama", safe_serialization=True)


def start_s3(where: Path):
    """The S3-compatible test server with bucket "bucket" holding shard-000.bin to shard-003.bin (4 MiB of
    float32 each): (process, endpoint), or (None, why not)."""
    server = ROOT / "tests" / "remote" / "s3rver"
    node = "/usr/bin/node" if os.access("/usr/bin/node", os.X_OK) else "/usr/local/bin/node"
    if not os.access(node, os.X_OK) or not (server / "node_modules" / "@20minutes" / "s3rver").exists():
        return None, "the S3 test server is not installed (scripts/install-deps.sh installs it)"
    (where / "s3-src").mkdir()
    (where / "s3-data").mkdir()
    rng = np.random.default_rng(3)
    for i in range(4):
        rng.standard_normal((1024, 1024)).astype(np.float32).tofile(where / "s3-src" / f"shard-{i:03d}.bin")
    proc = subprocess.Popen([node, str(server / "s3_server.js"), str(where / "s3-data"), "bucket", str(where / "s3-src")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().split()
    if not line or line[0] != "port":
        proc.kill()
        return None, "the S3 test server did not start"
    return proc, f"http://127.0.0.1:{line[1]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.watchdog(240)
@pytest.mark.parametrize("doc", DOCS)
def test_every_python_snippet_runs_as_written(tmp_path, doc):
    blocks = python_blocks(ROOT / doc)
    assert blocks, f"{doc} has no python snippet"
    for line, tags, _ in blocks:
        assert set(tags) <= KNOWN_TAGS, f"{doc}:{line}: unknown needs {tags}"
    make_workspace(tmp_path)
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(ferry.__file__).resolve().parents[1])]),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1", TQDM_DISABLE="1")
    s3 = None
    if any("remote" in tags for _, tags, _ in blocks):
        s3, endpoint = start_s3(tmp_path)
        if s3 is None:
            env["FERRY_DOC_NO_S3"] = endpoint
        else:
            env.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                       AWS_REGION="us-east-1", AWS_CONFIG_FILE=str(tmp_path / "none"),
                       AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    try:
        run = subprocess.run([sys.executable, "-c", _RUNNER, str(tmp_path / "blocks.json"), doc], cwd=tmp_path,
                             capture_output=True, text=True, timeout=220, env=env)
    finally:
        if s3 is not None:
            s3.stdin.close()
            s3.wait(10)
    results = [json.loads(l) for l in run.stdout.splitlines() if l.startswith('{"line"')]
    assert run.returncode == 0 and len(results) == len(blocks), run.stdout[-3000:] + run.stderr[-3000:]
    failed = [f"{doc}:{r['line']}\n{r['error']}" for r in results if r["status"] == "failed"]
    assert not failed, "\n\n".join(failed)
    ran = [r for r in results if r["status"] == "ran"]
    print(f"{doc}: {len(ran)} of {len(blocks)} snippets ran; skipped: "
          + "; ".join(f"line {r['line']} ({r['why']})" for r in results if r["status"] == "skipped"))
    untagged = [line for line, tags, _ in blocks if not tags]
    assert {r["line"] for r in ran} >= set(untagged), "a snippet that needs nothing more did not run"
