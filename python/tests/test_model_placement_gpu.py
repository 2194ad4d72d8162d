"""On the GPU machine: a transformers model loaded by ferry.torch.load_into_module computes bitwise what the
same checkpoint computes through from_pretrained (issue 47). Before, every weight was a view at its file
offset (8-byte aligned): cuBLAS and the attention kernels choose their code by their operands' alignment,
and the logits of a 32-token input differed by up to 0.055. The batch here (8 x 512 tokens) is large enough
for cuBLAS to choose by alignment. Also: the strict load refuses a model built under torch.device("meta")
(its rotary inv_freq would stay on meta) before reading, naming the buffer.

Skips without a CUDA device or transformers."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device here", allow_module_level=True)

import ferry.torch as ft  # noqa: E402


def with_dtype(make: Callable[..., Any], *args: Any, dtype: Any, **kwargs: Any) -> Any:
    """transformers 5 spells the dtype argument `dtype`; 4.x `torch_dtype`."""
    try:
        return make(*args, dtype=dtype, **kwargs)
    except TypeError:
        return make(*args, torch_dtype=dtype, **kwargs)


CONFIG = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5504, num_hidden_layers=2,
              num_attention_heads=16, num_key_value_heads=16, tie_word_embeddings=False)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: Any) -> Path:
    directory = tmp_path_factory.mktemp("llama")
    torch.manual_seed(0)
    with torch.device("cuda:0"):
        model = with_dtype(transformers.AutoModelForCausalLM.from_config, transformers.LlamaConfig(**CONFIG),
                           dtype=torch.bfloat16)
    model.save_pretrained(directory, safe_serialization=True, max_shard_size="300MB")
    del model
    torch.cuda.empty_cache()
    assert len(list(directory.glob("*.safetensors"))) > 1
    return directory


@pytest.mark.watchdog(240)
def test_a_loaded_model_computes_bitwise_what_from_pretrained_computes(saved):
    reference = with_dtype(transformers.AutoModelForCausalLM.from_pretrained, saved, dtype=torch.bfloat16,
                           device_map="cuda:0", attn_implementation="sdpa")
    config = transformers.AutoConfig.from_pretrained(saved)
    with ft.meta_parameters(buffers_device="cuda:0"):
        mine = with_dtype(transformers.AutoModelForCausalLM.from_config, config, dtype=torch.bfloat16,
                          attn_implementation="sdpa")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = ft.load_into_module(mine, saved)
    assert (result.missing_keys, result.unexpected_keys, result.meta) == ([], [], [])
    for name, p in mine.named_parameters():
        assert p.device == torch.device("cuda", 0), name
        assert p.data_ptr() % 256 == 0, f"{name} at {p.data_ptr():#x}"
    ref_state = reference.state_dict()
    assert all(torch.equal(t, ref_state[n]) for n, t in mine.state_dict().items())
    ids = torch.randint(0, CONFIG["vocab_size"], (8, 512), generator=torch.Generator().manual_seed(47)).to("cuda:0")
    with torch.no_grad():
        assert torch.equal(mine(ids).logits, reference(ids).logits)


def test_a_model_built_under_torch_device_meta_is_refused_naming_its_buffers(saved):
    config = transformers.AutoConfig.from_pretrained(saved)
    with torch.device("meta"):
        model = with_dtype(transformers.AutoModelForCausalLM.from_config, config, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"nothing was read\).*on the meta device and not in the checkpoint.*"
                                           r"inv_freq.*ferry\.torch\.meta_parameters"):
        ft.load_into_module(model, saved, device="cuda:0")
    assert all(p.device.type == "meta" for p in model.parameters())
