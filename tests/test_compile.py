"""torch.compile of the training forward (issue 47, item 4): one graph, no recompile across steps, eager's numbers.

Dynamo used to break the Orthros graph at ``int(q_index[0])`` in ``models.kernels.attention``, at the kernel-use
counter and at the labels' -100 check, and to recompile on the counter's value. The forward now reads no tensor value
on the host (``models.backbone.SuiteForCausalLM``), the kernels take the query positions as a host int, and the kernel
choice runs while Dynamo traces (``models.kernels._select``).
"""
import pytest
import torch

from models import kernels
from models.backbone import COMPILED_OUTPUT_MASK
from models.registry import build

VOCAB, B, T = 97, 2, 24


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _model(arch="orthros", layers=2, seed=0):
    """A tiny fp32 model (GQA 4:2, window 5 for the windowed archs), scale-offsets moved off identity."""
    torch.manual_seed(seed)
    overrides = {"window_size": 5} if arch != "transformer" else {}
    model = build(arch, "1M", vocab_size=VOCAB, num_hidden_layers=layers, num_key_value_heads=2,
                  max_position_embeddings=256, **overrides).train()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("alpha", "beta", "alpha_out", "beta_out")):
                p.add_(0.1 * torch.randn_like(p))
    return model


def _batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (B, T), generator=g) for _ in range(n)]


def _loss_and_grads(model, call, ids, labels=None):
    model.zero_grad(set_to_none=True)
    loss = call(input_ids=ids, labels=ids if labels is None else labels).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("arch", ["orthros", "swa"])
def test_training_steps_compile_to_one_graph_without_recompiles(arch):
    """fullgraph=True (a graph break raises) and error_on_recompile (a recompile raises) over three AdamW steps
    with fixed shapes and new tokens each step; the AOT-traced forward and backward give eager's loss and
    gradients; the kernels are counted once, when traced."""
    model = _model(arch)
    reference = _model(arch)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    opt, ref_opt = (torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, reference))
    counted = []
    with torch._dynamo.config.patch(error_on_recompile=True):
        for ids in _batches(3):
            kernels.reset_usage()
            loss, grads = _loss_and_grads(model, compiled, ids)
            counted.append(kernels.kernels_used())
            want, want_grads = _loss_and_grads(reference, reference, ids)
            torch.testing.assert_close(loss, want, rtol=1e-6, atol=0)
            for name, g in want_grads.items():
                torch.testing.assert_close(grads[name], g, rtol=1e-5, atol=1e-7, msg=name)
            opt.step(), ref_opt.step()
    calls = 2 * (2 if arch == "orthros" else 1)  # 2 layers x (base, output) streams
    assert counted == [{"blocked": calls}, {}, {}], "kernels are counted when traced, not on compiled calls"


def test_compiled_sft_labels_give_eager_loss_over_every_position():
    """Compiled, labels with -100 do not narrow the output positions (that reads their values): every position
    carries an output token and the loss is eager's, which scores the same targets."""
    model = _model()
    ids = _batches(1)[0]
    labels = ids.clone()
    labels[:, :9] = -100
    labels[1, 15:] = -100
    eager = model(input_ids=ids, labels=labels)
    compiled = torch.compile(model, fullgraph=True, backend="eager")(input_ids=ids, labels=labels)
    assert eager.logits.shape[1] == T - 9 and compiled.logits.shape[1] == T
    torch.testing.assert_close(compiled.loss, eager.loss, rtol=1e-6, atol=0)


def test_compiled_forward_refuses_output_mask():
    """output_mask chooses positions by value: under fullgraph it is refused with the suite's message."""
    model = _model(layers=1)
    ids = _batches(1)[0]
    mask = torch.zeros(T, dtype=torch.bool)
    mask[[2, 5]] = True
    with pytest.raises(Exception, match="output_mask chooses the output positions by value") as err:
        torch.compile(model, fullgraph=True, backend="eager")(input_ids=ids, labels=ids, output_mask=mask)
    assert COMPILED_OUTPUT_MASK in str(err.value)


@pytest.mark.parametrize("arch", ["orthros", "transformer"])
def test_host_known_positions_match_the_index_path_bit_for_bit(arch):
    """Eager, PT (output positions known on the host: slices and int query positions) and an all-True output_mask
    (the same positions as a device index: gathers, tensor query positions) give identical logits and gradients."""
    model = _model(arch)
    ids = _batches(1)[0]
    everything = torch.ones(T, dtype=torch.bool)
    results = []
    for kwargs in ({}, {"output_mask": everything}):
        model.zero_grad(set_to_none=True)
        out = model(input_ids=ids, labels=ids, **kwargs)
        out.loss.backward()
        results.append((out.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (logits, grads), (logits_index, grads_index) = results
    assert torch.equal(logits, logits_index)
    assert all(torch.equal(grads[n], grads_index[n]) for n in grads)


@pytest.mark.slow
def test_inductor_training_step_matches_eager():
    """Inductor (C++ on the CPU, fp32) gives eager's loss and gradients within 1e-5 relative to each tensor's
    largest entry (measured: under 1e-6). Slow: Inductor's first compile takes about a minute on 2 cores."""
    model = _model(layers=1)
    ids = _batches(1)[0]
    want, want_grads = _loss_and_grads(model, model, ids)
    compiled = torch.compile(model, fullgraph=True, backend="inductor")
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(2):
            loss, grads = _loss_and_grads(model, compiled, ids)
            assert abs(float(loss - want)) <= 1e-5 * abs(float(want))
            for name, g in want_grads.items():
                assert float((grads[name] - g).abs().max()) <= 1e-5 * float(g.abs().max()), name
