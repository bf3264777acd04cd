"""RoPE settings are honoured (theta, linear, llama3, yarn) or refused; never accepted and ignored."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from models import OrthrosConfig, OrthrosForCausalLM
from models.backbone import rope_cos_sin, rope_frequencies
from models.convert import transformer_to_orthros
from tests.reference import fp64_params, reference_forward

TINY = dict(vocab_size=61, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=48, max_position_embeddings=512, window_size=4, initializer_range=0.2)
T = 16


def _model(**kw):
    torch.manual_seed(0)
    config = AutoConfig.for_model("orthros", **{**TINY, **kw})
    return OrthrosForCausalLM(config).eval()


def _reference(model, ids, theta, positions=None):
    """The fp64 reference with RoPE base ``theta`` given here, not read from the model's config."""
    c = model.config
    cfg = SimpleNamespace(num_attention_heads=c.num_attention_heads, num_key_value_heads=c.num_key_value_heads,
                          head_dim=c.head_dim, rms_norm_eps=c.rms_norm_eps, num_hidden_layers=c.num_hidden_layers,
                          rope_theta=theta)
    return reference_forward(fp64_params(model), cfg, ids, list(range(len(ids))), window=4, positions=positions)


@pytest.mark.parametrize("theta, dtype", [(1e4, torch.float32), (1e6, torch.bfloat16)])
def test_default_rope_tables_are_the_suite_fp64_formula_bit_for_bit(theta, dtype):
    """The default type keeps the suite's convention exactly (committed results depend on it)."""
    config = OrthrosConfig(**{**TINY, "head_dim": 128, "rope_theta": theta})
    positions = torch.tensor([[0, 1, 7, 4095, 131071, 1048575]])
    inv_freq = 1.0 / (theta ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128))
    angles = positions.to(torch.float64)[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    cos, sin = rope_cos_sin(positions, rope_frequencies(config), dtype)
    assert torch.equal(cos, angles.cos().to(dtype)) and torch.equal(sin, angles.sin().to(dtype))


@pytest.mark.parametrize("spelling", [dict(rope_parameters={"rope_type": "default", "rope_theta": 5e5}),
                                      dict(rope_theta=5e5)], ids=["rope_parameters", "rope_theta"])
def test_rope_theta_is_used_in_either_spelling(spelling):
    model = _model(**spelling)
    assert model.config.rope_theta == 5e5 and model.config.rope_parameters["rope_theta"] == 5e5
    ids = torch.randint(0, 61, (1, T))
    with torch.no_grad():
        got = model(ids).logits[0].double()
    torch.testing.assert_close(got, _reference(model, ids[0].tolist(), 5e5), atol=1e-5, rtol=0)
    assert (got - _reference(model, ids[0].tolist(), 1e4)).abs().max() > 1e-3  # the base is not the default's


@pytest.mark.parametrize("spelling", ["rope_scaling", "rope_parameters"])
def test_linear_scaling_divides_positions_by_the_factor(spelling):
    model = _model(**{spelling: {"rope_type": "linear", "factor": 4.0}})
    ids = torch.randint(0, 61, (1, T))
    with torch.no_grad():
        got = model(ids).logits[0].double()
    ref = _reference(model, ids[0].tolist(), 1e4, positions=[t / 4.0 for t in range(T)])
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
    assert (got - _reference(model, ids[0].tolist(), 1e4)).abs().max() > 1e-3


@pytest.mark.parametrize("rope", [
    {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 16},
    {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0, "original_max_position_embeddings": 64},
    {"rope_type": "linear", "rope_theta": 1e6, "factor": 2.0},
], ids=["llama3", "yarn", "linear"])
def test_converted_llama_keeps_its_rope_scaling(rope):
    """transformers' own LlamaForCausalLM is the reference: the converted model (w >= T) gives its logits."""
    torch.manual_seed(0)
    shape = dict(vocab_size=61, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=48, max_position_embeddings=256, initializer_range=0.2)
    source = LlamaForCausalLM(LlamaConfig(**shape, rope_parameters=dict(rope))).eval()
    plain = LlamaForCausalLM(LlamaConfig(**shape, rope_theta=rope["rope_theta"])).eval()
    plain.load_state_dict(source.state_dict())
    converted = transformer_to_orthros(source, window_size=24)
    assert converted.config.rope_parameters["rope_type"] == rope["rope_type"]
    ids = torch.randint(0, 61, (2, 24))
    with torch.no_grad():
        got, want = converted(ids).logits, source(ids).logits
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
        assert (got - plain(ids).logits).abs().max() > 1e-3  # the scaling matters at this length


def test_engine_and_save_load_keep_the_rope(tmp_path):
    from models.runtime.decode import Engine

    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}
    model = _model(rope_parameters=dict(rope))
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["rope_parameters"]["rope_type"] == "yarn" and saved["rope_parameters"]["factor"] == 4.0
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    ids = torch.randint(0, 61, (2, T))
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits, atol=0, rtol=0)
        engine = Engine(model, batch=2, max_len=T + 4, bucket=8, chunk=4)
        first = engine.prefill(ids)
        torch.testing.assert_close(first, model(ids, logits_to_keep=1).logits[:, 0], atol=1e-5, rtol=0)
        step = engine.decode(1, keep_logits=True)[0]
        seq = torch.cat([ids, first.argmax(-1, keepdim=True)], 1)
        torch.testing.assert_close(step, model(seq, logits_to_keep=1).logits[:, 0], atol=1e-5, rtol=0)


def test_legacy_config_json_with_top_level_rope_theta_loads(tmp_path):
    model = _model(rope_theta=5e5)
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    saved.pop("rope_parameters", None)
    saved["rope_theta"] = 5e5  # how configs saved before rope_parameters spelled it
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert AutoConfig.from_pretrained(tmp_path).rope_parameters == {"rope_type": "default", "rope_theta": 5e5}


LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


@pytest.mark.parametrize("kw, pattern", [
    (dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0}), r"rope_type.*'dynamic'"),
    (dict(rope_scaling={"rope_type": "longrope", "factor": 2.0}), r"rope_type.*'longrope'"),
    (dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "foo": 1}), r"'foo'.*1"),
    (dict(rope_parameters={"rope_type": "linear"}), r"'factor'"),
    (dict(rope_parameters={"rope_type": "linear", "factor": -1.0}), r"'factor'.*-1"),
    (dict(rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}), r"partial_rotary_factor.*0\.5"),
    (dict(rope_theta=1e4, rope_parameters={"rope_type": "default", "rope_theta": 5e5}), r"rope_theta"),
    (dict(rope_theta=0.0), r"rope_theta.*0\.0"),
    (dict(rope_parameters={"rope_type": "linear", "factor": 2.0}, rope_scaling={"rope_type": "linear", "factor": 3.0}),
     r"rope_scaling"),
    # without original_max_position_embeddings transformers takes max_position_embeddings: llama3 then changes no
    # frequency and yarn only rescales cos and sin
    (dict(rope_parameters=LLAMA3), r"rope_parameters\['original_max_position_embeddings'\] is required for rope_type "
                                   r"'llama3'"),
    (dict(rope_scaling={"type": "yarn", "factor": 4.0}), r"'original_max_position_embeddings'\] is required.*'yarn'"),
    (dict(rope_parameters={**LLAMA3, "original_max_position_embeddings": 0}), r"original_max_position_embeddings.*0"),
    (dict(rope_parameters={**LLAMA3, "original_max_position_embeddings": 16, "high_freq_factor": 1.0}),
     r"high_freq_factor.*must exceed low_freq_factor"),
    (dict(rope_parameters={**YARN, "beta_fast": 0}), r"'beta_fast'\]=0 must be a positive"),  # read as 32
    (dict(rope_parameters={**YARN, "mscale": 0.7}), r"'mscale'\] and \['mscale_all_dim'\] are used only together"),
    (dict(rope_parameters={**YARN, "attention_factor": 1.2, "mscale": 1.0, "mscale_all_dim": 1.0}),
     r"attention_factor.*or the mscale pair"),
    (dict(rope_parameters={**YARN, "truncate": "no"}), r"'truncate'\]='no' must be true or false"),
])
def test_unsupported_or_contradictory_rope_settings_raise(kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        OrthrosConfig(**{**TINY, **kw})


def test_a_saved_config_without_the_original_length_is_refused_on_load(tmp_path):
    _model(rope_parameters={**LLAMA3, "original_max_position_embeddings": 16}).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    del saved["rope_parameters"]["original_max_position_embeddings"]
    (tmp_path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="'original_max_position_embeddings'\\] is required for rope_type 'llama3'"):
        AutoModelForCausalLM.from_pretrained(tmp_path)


def test_token_major_rope_is_the_head_major_rope():
    """The fused benchmark functions' token-major RoPE is the model's RoPE, bitwise (one formula, rotate_half_rope)."""
    from models.backbone import apply_rope, apply_rope_token_major

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, 8, generator=g)  # [B, T, H, d]
    cos, sin = rope_cos_sin(torch.arange(5)[None].expand(2, -1), (torch.rand(4, generator=g).double(), 1.0),
                            torch.float32)
    assert torch.equal(apply_rope_token_major(x, cos, sin).transpose(1, 2), apply_rope(x.transpose(1, 2), cos, sin))
