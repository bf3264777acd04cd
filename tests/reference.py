"""An independent fp64 per-position implementation of Orthros, written from the paper's equations.

It shares no code with ``models/``: it reads the weights from a state dict and loops over
positions and heads, Eq. (4) for the base stream, Eq. (5) for the output stream, RoPE as explicit
2x2 rotations of channel pairs (i, i + d/2). It is slow on purpose; tests keep T and sizes small.
"""
from __future__ import annotations

import math

import torch


def rms_norm(x, weight, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def rope(vec, pos, theta):
    """Rotate one head vector [d] to position ``pos``, pairs (i, i + d/2)."""
    d = vec.shape[-1]
    half = d // 2
    out = vec.clone()
    for i in range(half):
        angle = pos * theta ** (-2.0 * i / d)
        c, s = math.cos(angle), math.sin(angle)
        a, b = vec[i], vec[i + half]
        out[i] = a * c - b * s
        out[i + half] = b * c + a * s
    return out


def softmax_attend(q, keys, values, allowed):
    scores = torch.stack([torch.dot(q, keys[j]) for j in allowed]) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=0)
    return sum(w * values[j] for w, j in zip(weights, allowed))


def reference_forward(params: dict, cfg, ids: list[int], out_positions: list[int], window: int | None,
                      two_stream: bool = True, positions: list[int] | None = None):
    """Logits [len(out_positions), V] (fp64) for one unpadded sequence ``ids``.

    ``params``: fp64 tensors keyed like the suite's state dict (they may require grad).
    ``window``: base-stream window w (None = full). ``two_stream=False`` gives a plain Transformer/SWA:
    logits then come from the base rows at ``out_positions``.
    """
    T = len(ids)
    positions = positions if positions is not None else list(range(T))
    H, Hkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    group = H // Hkv
    eps, theta = cfg.rms_norm_eps, cfg.rope_theta
    x = [params["model.embed_tokens.weight"][i] for i in ids]
    xo = [x[p] for p in out_positions]
    for layer in range(cfg.num_hidden_layers):
        pre = f"model.layers.{layer}."
        g = lambda name: params.get(pre + name)  # noqa: E731
        xn = [rms_norm(v, g("input_layernorm.weight"), eps) for v in x]
        xon = [rms_norm(v, g("input_layernorm.weight"), eps) for v in xo]
        Wq, Wk, Wv, Wo = (g(f"mixer.{n}_proj.weight") for n in "qkvo")

        def heads(vec, W, n):
            return (W @ vec).view(n, hd)

        def query(vec, stream):
            q = heads(vec, Wq, H)
            if g("mixer.q_norm.weight") is not None:
                q = torch.stack([rms_norm(q[h], g("mixer.q_norm.weight"), eps) for h in range(H)])
            suffix = "" if stream == "base" else "_out"
            if g("mixer.alpha" + suffix) is not None:
                q = g("mixer.alpha" + suffix) * q + g("mixer.beta" + suffix)
            return q

        keys, vals = [], []
        for t in range(T):
            k = heads(xn[t], Wk, Hkv)
            if g("mixer.k_norm.weight") is not None:
                k = torch.stack([rms_norm(k[h], g("mixer.k_norm.weight"), eps) for h in range(Hkv)])
            keys.append([rope(k[h], positions[t], theta) for h in range(Hkv)])
            vals.append(heads(xn[t], Wv, Hkv))

        def attend(qvec, t, w):
            allowed = [j for j in range(t + 1) if w is None or j > t - w]
            out = []
            for h in range(H):
                kv = h // group
                qh = rope(qvec[h], positions[t], theta)
                out.append(softmax_attend(qh, [keys[j][kv] for j in range(T)], [vals[j][kv] for j in range(T)],
                                          allowed))
            return Wo @ torch.cat(out)

        x = [x[t] + attend(query(xn[t], "base"), t, window) for t in range(T)]
        if two_stream:
            xo = [xo[i] + attend(query(xon[i], "out"), p, None) for i, p in enumerate(out_positions)]

        def mlp(v):
            u = rms_norm(v, g("post_attention_layernorm.weight"), eps)
            gate = g("mlp.gate_proj.weight") @ u
            return v + g("mlp.down_proj.weight") @ (gate * torch.sigmoid(gate) * (g("mlp.up_proj.weight") @ u))

        x = [mlp(v) for v in x]
        xo = [mlp(v) for v in xo] if two_stream else [x[p] for p in out_positions]
    if not two_stream:
        xo = [x[p] for p in out_positions]
    head = params.get("lm_head.weight", params["model.embed_tokens.weight"])
    return torch.stack([head @ rms_norm(v, params["model.norm.weight"], eps) for v in xo])


def fp64_params(model, requires_grad: bool = False) -> dict:
    return {k: v.detach().double().clone().requires_grad_(requires_grad) for k, v in model.state_dict().items()}
