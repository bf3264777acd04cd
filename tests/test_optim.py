"""The optimizer and lr schedules every training loop uses (suite.train.optim)."""
import math

import pytest
import torch

from suite.train import optim


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)             # a matrix and a bias
        self.norm = torch.nn.LayerNorm(4)
        self.frozen = torch.nn.Parameter(torch.ones(3, 3), requires_grad=False)


def test_adamw_decays_matrices_only_unless_asked_for_all():
    model = Tiny()
    opt = optim.adamw(model, 1e-3, 0.1)
    decay, rest = opt.param_groups
    assert [p.shape for p in decay["params"]] == [(4, 4)] and decay["weight_decay"] == 0.1
    assert len(rest["params"]) == 3 and rest["weight_decay"] == 0.0     # bias, norm weight and bias; not the frozen
    assert decay["betas"] == (0.9, 0.95) and decay["eps"] == 1e-8
    (one,) = optim.adamw(model, 1e-3, 0.1, decay_all=True, betas=(0.9, 0.999)).param_groups
    assert len(one["params"]) == 5 and one["weight_decay"] == 0.1 and one["betas"] == (0.9, 0.999)


def test_cosine_to_min_lr_ends_at_its_floor():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = optim.cosine_to_min_lr(opt, 10, 2, 0.1)
    got = []
    for _ in range(11):
        got.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert got[0] == 0.0 and got[2] == pytest.approx(1.0) and got[10] == pytest.approx(0.1)


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_lr_schedules_follow_their_formula(schedule):
    steps, warmup, lr = 50, 5, 1e-3
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
    sched = optim.lr_schedule(opt, schedule, steps, warmup)
    got = []
    for _ in range(steps):
        got.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    decay = round(optim.WSD_DECAY * steps)  # 10 steps, from step 40 on
    for s, value in enumerate(got):
        if schedule == "cosine":
            want = min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / steps))
        elif s < warmup:
            want = s / warmup
        elif s < steps - decay:
            want = 1.0
        else:
            want = 0.5 * (1 + math.cos(math.pi * (s - (steps - decay)) / decay))
        assert value == pytest.approx(lr * want, abs=1e-12), (schedule, s)
    with pytest.raises(ValueError, match="schedule"):
        optim.lr_schedule(opt, "linear", steps, warmup)


def _role(name: str) -> str:
    """The role a parameter name says it has, independently of suite.train.optim's rule."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf in ("alpha", "beta", "alpha_out", "beta_out"):
        return "scale-offset"
    if leaf in ("A_log", "dt_bias"):
        return "gate"
    if leaf == "bias":
        return "bias"
    if "norm" in name:
        return "norm"
    return "matrix"


@pytest.mark.parametrize("arch", ["orthros", "orthros_noso", "transformer", "swa", "gdn", "gla", "retnet",
                                  "linear_hybrid", "orthros_h"])
def test_weight_decay_follows_each_parameter_role(arch):
    """Every parameter of every architecture: projections, MLP, embeddings, LM head and short convolutions are
    decayed; norms, biases, gates and the scale-offset are not (the rule is by role, not by number of dims)."""
    from models import registry

    model = registry.build(arch, "1M", vocab_size=64)
    decayed = optim.decays(model)
    assert set(decayed) == {n for n, p in model.named_parameters() if p.requires_grad}
    for name, d in decayed.items():
        assert d == (_role(name) == "matrix"), (arch, name, _role(name), d)
    if arch == "orthros":
        assert any(_role(n) == "scale-offset" for n in decayed)
    opt = optim.adamw(model, 1e-3, 0.1)
    groups = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    assert len(groups) == len(decayed)
    for name, p in model.named_parameters():
        assert groups[id(p)] == (0.1 if decayed[name] else 0.0), name


def test_scale_offset_stays_at_identity_under_weight_decay_without_gradient():
    """One zero-gradient AdamW step at weight decay 0.1 leaves alpha = 1 and beta = 0 (decoupled decay on them
    would move alpha to 1 - lr * wd)."""
    from models import registry

    model = registry.build("orthros", "1M", vocab_size=64)
    opt = optim.adamw(model, 1e-2, 0.1)
    w = model.model.layers[0].mlp.up_proj.weight
    before = w.detach().clone()
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    mixer = model.model.layers[0].mixer
    assert torch.equal(mixer.alpha, torch.ones_like(mixer.alpha))
    assert torch.equal(mixer.beta, torch.zeros_like(mixer.beta))
    torch.testing.assert_close(w.detach(), before * (1 - 1e-2 * 0.1))  # the matrices are decayed
