"""No config key is accepted and then ignored: changing any field of a suite model config changes the model's
output (logits, or what generate() returns) or raises ValueError. The field lists are read from the config
classes' signatures, so a field added without a case here fails the coverage check."""
from __future__ import annotations

import inspect
import zlib

import pytest
import torch

from models.backbone import SuiteConfig
from models.registry import ARCHS, build, known_archs

T = 12
BASE = dict(vocab_size=67, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=8, intermediate_size=96, max_position_embeddings=64, bos_token_id=1)
ARCH_BASE = {"orthros": dict(window_size=8), "swa": dict(window_size=6),  # hybrids: attention at layers 1 and 3
             "linear_hybrid": dict(full_attention_interval=2, num_hidden_layers=4),
             "orthros_h": dict(full_attention_interval=2, num_hidden_layers=4, window_size=8)}
IDS = torch.randint(3, 67, (2, T), generator=torch.Generator().manual_seed(0))

# the changed value of each field; a callable gets the arch and the unchanged outputs
ALT = {
    "vocab_size": 71, "hidden_size": 40, "num_hidden_layers": 3, "num_attention_heads": 2,
    "num_key_value_heads": lambda arch, _: 4 if arch in LINEAR else 1,  # linear: the Orthros budget's (GQA 4:2 -> MHA)
    "head_dim": 16, "intermediate_size": 128, "max_position_embeddings": T - 4, "rope_theta": 5e5,
    "rope_parameters": {"rope_type": "linear", "factor": 4.0}, "rope_scaling": {"rope_type": "linear", "factor": 4.0},
    "rms_norm_eps": 0.5, "initializer_range": 0.2, "attention_bias": True, "qk_norm": True,
    "window_size": lambda arch, _: 3 if arch in ("swa",) else 4, "tie_word_embeddings": True,
    "pad_token_id": int(IDS[0, T - 2]), "bos_token_id": 2,  # generate() masks the prompt's pad tokens
    "eos_token_id": lambda arch, out: int(out[1][0, T]),  # the first token generated: generation stops there
    "scale_offset": False, "match_budget": False, "reference_intermediate_size": 100,
    "gdn_num_heads": 2, "gdn_head_dim": 4, "gdn_expand_v": 1.0, "conv_size": 2,
    "expand_k": lambda arch, _: 1.0 if arch == "gla" else 0.5,
    "expand_v": lambda arch, _: 2.0 if arch == "gla" else 1.0,
    "linear_num_heads": 2, "full_attention_interval": 1,
    "gla_short_conv": True,  # GLA's conv_size is read only with it: conv_size=2 alone raises ValueError
}
LINEAR = ("gdn", "gla", "retnet")  # no attention layer: heads, KV heads, head_dim set the Orthros budget they match
LEGACY = {"rope_scaling"}  # accepted keywords that are not __init__ parameters


def fields(config_cls) -> set[str]:
    """The keyword fields declared by a suite config class and its suite bases."""
    names = set()
    for cls in config_cls.__mro__:
        if "__init__" in cls.__dict__ and issubclass(cls, SuiteConfig):
            names |= {n for n, p in inspect.signature(cls.__init__).parameters.items()
                      if n != "self" and p.kind is p.POSITIONAL_OR_KEYWORD}
    return names | LEGACY


def outputs(arch: str, **change):
    """(logits of IDS, greedy generate() from IDS[:1], generate() from BOS alone), or the ValueError raised."""
    torch.manual_seed(0)
    try:
        model = build(arch, "1M", **{**BASE, **ARCH_BASE.get(arch, {}), **change}).eval()
        with torch.no_grad():
            for name, p in model.named_parameters():  # weights away from their init (zero biases, identity SO)
                p.add_(0.2 * torch.randn(p.shape, generator=torch.Generator().manual_seed(zlib.crc32(name.encode()))))
            return (model(IDS).logits, model.generate(IDS[:1], max_new_tokens=4, do_sample=False),
                    model.generate(max_new_tokens=2, do_sample=False))
    except ValueError as err:
        return err


def _same(a, b) -> bool:
    return all(x.shape == y.shape and torch.allclose(x, y, atol=1e-6, rtol=0) for x, y in zip(a, b))


ARCH_LIST = ["orthros", "transformer", "swa", "gdn", "gla", "retnet", "linear_hybrid", "orthros_h"]


def test_every_field_has_a_case():
    known_archs()
    missing = {arch: sorted(fields(ARCHS[arch].config_cls) - set(ALT)) for arch in ARCH_LIST}
    assert not any(missing.values()), f"config fields without a case in ALT: {missing}"


@pytest.mark.parametrize("arch", ARCH_LIST)
def test_changing_any_field_changes_the_output_or_raises(arch):
    known_archs()
    base = outputs(arch)
    assert not isinstance(base, Exception), base
    ignored = []
    for name in sorted(fields(ARCHS[arch].config_cls)):
        alt = ALT[name](arch, base) if callable(ALT[name]) else ALT[name]
        got = outputs(arch, **{name: alt})
        if not isinstance(got, ValueError) and _same(got, base):
            ignored.append(f"{name}={alt!r}")
    assert not ignored, f"{arch}: accepted and ignored: {ignored}"


@pytest.mark.parametrize("kw, pattern", [
    (dict(sliding_window=4), r"sliding_window=4 is not a field"),
    (dict(output_hidden_states=True), r"output_hidden_states=True"),
    (dict(output_attentions=True), r"output_attentions=True"),
    (dict(return_dict=False), r"return_dict=False"),
    (dict(chunk_size_feed_forward=2), r"chunk_size_feed_forward=2"),
])
def test_generic_keys_the_models_do_not_implement_raise(kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        build("orthros", "1M", **BASE, **ARCH_BASE["orthros"], **kw)


@pytest.mark.parametrize("arch", ["gdn", "gla", "retnet"])
def test_linear_models_refuse_attention_only_fields(arch):
    for kw, name in ((dict(window_size=4), "window_size"), (dict(qk_norm=True), "qk_norm"),
                     (dict(attention_bias=True), "attention_bias"), (dict(rope_theta=5e5), "rope_parameters")):
        with pytest.raises(ValueError, match=f"{name}=.*no attention layer"):
            build(arch, "1M", **BASE, **kw)
