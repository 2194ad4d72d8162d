"""Which save of CUDA tensors crashes: each case in a fresh process (python3 sharded_gpu_save.py CASE)."""
import os
import subprocess
import sys
import tempfile

CASES = ["sharded-cuda", "file-cuda", "sharded-cpu", "sharded-cuda-scratch", "sharded-cuda-one-shard",
         "sharded-linear"]


def run(case, out):
    import torch
    import ferry.safetensors as st
    torch.manual_seed(0)
    if case == "sharded-linear":
        model = torch.nn.Linear(64, 64).cuda()
    else:
        model = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.Linear(64, 64),
                                    torch.nn.LayerNorm(64)).cuda()
    sd = model.state_dict()
    if case == "sharded-cpu":
        sd = {k: v.cpu() for k, v in sd.items()}
    if case == "file-cuda":
        r = st.save_file(sd, os.path.join(out, "m.safetensors"))
    elif case == "sharded-cuda-scratch":
        r = st.save_sharded(sd, os.path.join(out, "m"), max_shard_size=10_000, durable=False)
    elif case == "sharded-cuda-one-shard":
        r = st.save_sharded(sd, os.path.join(out, "m"))
    else:
        r = st.save_sharded(sd, os.path.join(out, "m"), max_shard_size=10_000)
    print(case, "ok", r)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        run(sys.argv[1], sys.argv[2])
        sys.exit(0)
    for case in CASES:
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([sys.executable, __file__, case, d], capture_output=True, text=True, timeout=60)
            print(f"== {case}: exit {p.returncode}")
            print(p.stdout[-3000:])
            print(p.stderr[-6000:])
