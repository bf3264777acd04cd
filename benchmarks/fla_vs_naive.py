"""GPU cross-check of the FLA mixers: Triton kernels vs the CPU/naive route, plus training throughput.

For each FLA mixer (GDN, GLA, RetNet, built as the suite builds them, random weights), run one layer
forward and backward on T tokens twice on the same GPU: once through FLA's Triton kernels, once
through :mod:`baselines.fla_internals` (FLA's pure-PyTorch references, forced onto the GPU with
``force_naive``). Writes ``fla_crosscheck.csv``: mixer, direction (forward | backward), seq_len,
dtype, max_abs_err, rel_err (Frobenius ||kernel - naive|| / ||naive||), tolerance, passed, status.
Backward compares the gradients of ``sum(out * w)`` (fixed random w) w.r.t. the input and all
layer parameters, concatenated.

FLA 0.6 refuses GDN's gated backward on Hopper with Triton 3.4 <= v < 3.7.1 unless tilelang is
installed; that refusal is recorded as a row with status ``not run: ...`` saying what to install.

Then a short training run per architecture (AdamW, bf16 autocast on GPU) writes
``baseline_throughput.csv``: arch, size, n_params, batch, seq_len, steps, ms_per_step, tokens_per_s
(tok/s, timed steps only, after warm-up steps that include Triton JIT compilation), status.

Usage (GPU): ``python -m benchmarks.fla_vs_naive`` (writes results/gpu/).
CPU plumbing check: ``python -m benchmarks.fla_vs_naive --dry-run`` (1M size, T=32, fp32). With no
Triton on CPU, the forward rows there compare the full-sequence CPU route with the token-by-token
cached route, the backward rows compare the CPU route with itself; the status column says so.
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import torch

from suite.cli import nonnegative_int, out_folder, positive_int
from suite.common import DTYPES as TORCH_DTYPES
from suite.common import arch_name, size_name

MIXERS = ("gdn", "gla", "retnet")
THROUGHPUT_ARCHS = ("transformer", "swa", "orthros", "gdn", "gla", "retnet", "linear_hybrid", "orthros_h")
TOLERANCE = {"fp32": 5e-3, "bf16": 3e-2}  # relative (Frobenius) error
DTYPES = {"fp32": TORCH_DTYPES["float32"], "bf16": TORCH_DTYPES["bfloat16"]}  # this CSV's short dtype names
TILELANG_HINT = ("install tilelang (0.1.15, with apache-tvm-ffi 0.1.12, torch-c-dlpack-ext 0.1.5, z3-solver 4.15.4) "
                 "next to FLA, or use Triton >= 3.7.1")


def _is_tilelang_refusal(err: Exception) -> bool:
    text = str(err)
    return "tilelang" in text or "chunk_bwd_dqkwg" in text


def _run_layer(mixer, x, weight, ctx, naive: bool):
    from baselines import fla_internals

    mixer.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(True)
    guard = fla_internals.force_naive() if naive else torch.enable_grad()
    with guard:
        out = mixer(x, ctx)
        forward = out.detach()
        (out.float() * weight).sum().backward()
    grads = [x.grad.flatten()] + [p.grad.flatten() for p in mixer.parameters() if p.grad is not None]
    return forward, torch.cat([g.float() for g in grads])


def _recurrent_forward(mixer, x):
    """The layer run one token at a time with its cache (the decode route), no grad: [1, T, D]."""
    from models.backbone import MixerContext, SuiteCache

    cache, outs = SuiteCache(mixer.layer_idx + 1), []
    with torch.no_grad():
        for t in range(x.shape[1]):
            index = torch.tensor([t], device=x.device)
            ctx = MixerContext(positions=index[None], q_index=index, out_index=index[:1] * 0, key_mask=None,
                               attention_mask=None, cache=cache)
            outs.append(mixer(x[:, t:t + 1], ctx))
            cache.seq_len = t + 1
    return torch.cat(outs, 1)


def crosscheck(mixer_name: str, size: str, seq_len: int, dtype_name: str, device: str, dry_run: bool,
               seed: int = 0) -> list[dict]:
    """Rows (forward, backward) comparing one mixer's kernel route with the naive route."""
    from models.backbone import MixerContext
    from models.registry import make_config

    from .gpu_common import errors

    torch.manual_seed(seed)
    config = make_config(mixer_name, size, max_position_embeddings=max(seq_len, 2048))
    mixer = type(config).make_mixer(config, 0).to(device=device, dtype=DTYPES[dtype_name])
    x = torch.randn(1, seq_len, config.hidden_size, device=device, dtype=DTYPES[dtype_name])
    weight = torch.randn(1, seq_len, config.hidden_size, device=device)
    ctx = MixerContext(positions=torch.arange(seq_len, device=device)[None],
                       q_index=torch.arange(seq_len, device=device), out_index=torch.arange(seq_len, device=device),
                       key_mask=None, attention_mask=None, cache=None)
    base = {"mixer": mixer_name, "size": size, "seq_len": seq_len, "dtype": dtype_name,
            "tolerance": TOLERANCE[dtype_name]}
    status = {"forward": "ok", "backward": "ok"}
    naive_fwd, naive_bwd = _run_layer(mixer, x, weight, ctx, naive=True)
    rows = []
    try:
        kernel_fwd, kernel_bwd = _run_layer(mixer, x, weight, ctx, naive=False)
        if dry_run:  # no Triton on CPU: check the full-sequence route against the token-by-token cached route
            kernel_fwd = _recurrent_forward(mixer, x)
            status = {"forward": "dry-run: CPU token-by-token cached route vs CPU full-sequence route",
                      "backward": "dry-run: both sides are the CPU route"}
    except RuntimeError as err:
        if not _is_tilelang_refusal(err):
            raise
        with torch.no_grad():
            kernel_fwd = mixer(x, ctx)
        kernel_bwd = None
        reason = (f"not run: FLA refuses the GDN gated backward here (triton {_triton_version()}): "
                  f"{str(err).splitlines()[0]} -> {TILELANG_HINT}")
    for direction, kernel, naive in (("forward", kernel_fwd, naive_fwd), ("backward", kernel_bwd, naive_bwd)):
        if kernel is None:
            rows.append({**base, "direction": direction, "max_abs_err": None, "rel_err": None, "passed": None,
                         "status": reason})
            continue
        err = errors(kernel, naive, torch.float32, floor=1e-12)
        rows.append({**base, "direction": direction, "max_abs_err": err["max_abs_err"], "rel_err": err["rel_err"],
                     "passed": err["rel_err"] <= TOLERANCE[dtype_name], "status": status[direction]})
    return rows


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except ImportError:
        return "absent"


def _tilelang_version() -> str:
    try:
        import tilelang

        return tilelang.__version__
    except Exception:  # absent, or present without its dependencies (z3, tvm-ffi)
        return "absent"


def throughput(arch: str, size: str, batch: int, seq_len: int, steps: int, warmup: int, device: str,
               seed: int = 0) -> dict:
    """Training tokens/s of ``arch`` at ``size`` (AdamW; bf16 autocast on CUDA). A bare step on purpose, not
    :func:`suite.train.loop.fit`: it times every architecture's forward, backward and update alike, without the
    loop's per-step host sync (its divergence check), clipping or schedule."""
    from baselines import swa_window
    from models.registry import build
    from models.sizes import count_parameters

    from .gpu_common import timed

    overrides = {"max_position_embeddings": max(seq_len, 2048)}
    if arch == "swa":
        overrides["window_size"] = swa_window(seq_len)
    row = {"arch": arch, "size": size, "batch": batch, "seq_len": seq_len, "steps": steps}
    torch.manual_seed(seed)
    model = build(arch, size, **overrides).to(device).train()
    row["n_params"] = count_parameters(model)
    row["window"] = model.config.window_size
    ids = torch.randint(0, model.config.vocab_size, (batch, seq_len), device=device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.startswith("cuda") else torch.autocast(
        "cpu", enabled=False)

    def step():
        with autocast:
            loss = model(ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    try:
        for _ in range(warmup):
            step()
        with timed(device) as clock:
            for _ in range(steps):
                step()
        elapsed = clock.s
    except RuntimeError as err:
        if not _is_tilelang_refusal(err):
            raise
        return {**row, "ms_per_step": None, "tokens_per_s": None,
                "status": f"not run: {str(err).splitlines()[0]} -> {TILELANG_HINT}"}
    return {**row, "ms_per_step": 1e3 * elapsed / steps, "tokens_per_s": batch * seq_len * steps / elapsed,
            "status": "ok"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, 1M size, T=32, fp32: checks the plumbing")
    parser.add_argument("--out-dir", type=out_folder, default=None, help="output folder (default results/gpu; dry run: "
                        "work_dirs/fla_vs_naive_dry_run)")
    parser.add_argument("--seq-len", type=positive_int, default=2048, help="cross-check length T (default 2048)")
    parser.add_argument("--size", type=size_name, default="25M", help="model size for both parts (default 25M)")
    parser.add_argument("--dtypes", nargs="*", default=["bf16", "fp32"], choices=list(DTYPES),
                        help="cross-check dtypes; none skips the cross-check")
    parser.add_argument("--batch", type=positive_int, default=8, help="throughput batch (default 8)")
    parser.add_argument("--train-seq-len", type=positive_int, default=2048,
                        help="throughput sequence length (default 2048)")
    parser.add_argument("--steps", type=positive_int, default=5, help="timed training steps (default 5)")
    parser.add_argument("--warmup", type=nonnegative_int, default=2, help="untimed warm-up steps (default 2)")
    parser.add_argument("--archs", nargs="*", type=arch_name, default=list(THROUGHPUT_ARCHS),
                        help="throughput architectures; none skips the throughput part")
    parser.add_argument("--mixers", nargs="*", default=list(MIXERS), choices=list(MIXERS), help="cross-checked mixers")
    parser.add_argument("--append", action="store_true",
                        help="keep the rows of other mixers/dtypes and archs already in the two CSVs")
    parser.add_argument("--seed", type=nonnegative_int, default=0)
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        parser.error("no CUDA device: run on the GPU machine, or pass --dry-run for the CPU plumbing check")

    # Offline unless the caller says otherwise: huggingface_hub reads these when it is first imported (by
    # transformers, through models), so they are set here, before the lazy imports below and in the helpers.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from models import kernels as attention_kernels
    from suite.provenance import provenance, read_csv, write_csv

    from .gpu_common import env_info

    if args.dry_run:
        device, profile = "cpu", "dry-run"
        args.size, args.seq_len, args.dtypes, args.batch, args.train_seq_len = "1M", 32, ["fp32"], 2, 32
        args.steps, args.warmup = 1, 1
        out_dir = args.out_dir or "work_dirs/fla_vs_naive_dry_run"
    else:
        device, profile = "cuda", "gpu"
        out_dir = args.out_dir or "results/gpu"
    warnings.filterwarnings("ignore", message=".*Triton is not supported.*")
    env = env_info(device)
    backend = "fla-triton vs fla-naive" if device == "cuda" else "fla-naive (cpu)"

    def kept(name: str, replaced) -> list[dict]:
        path = os.path.join(out_dir, name)
        if not (args.append and os.path.exists(path)):
            return []
        return [r for r in read_csv(path).to_dict("records") if not replaced(r)]

    rows = kept("fla_crosscheck.csv", lambda r: r["mixer"] in args.mixers and r["dtype"] in args.dtypes)
    for dtype_name in args.dtypes:
        for mixer in args.mixers:
            start = time.time()
            found = crosscheck(mixer, args.size, args.seq_len, dtype_name, device, args.dry_run, args.seed)
            used = backend + (f" (tilelang {_tilelang_version()})" if mixer == "gdn" and device == "cuda" else "")
            prov = provenance(profile, args.seed, dtype_name, used, device, time.time() - start)
            rows += [{**row, **prov, **env} for row in found]
            write_csv(rows, os.path.join(out_dir, "fla_crosscheck.csv"))  # row by row: a cut run keeps its rows
            for row in found:
                print(f"{mixer:7s} {row['direction']:8s} {dtype_name}: rel_err={row['rel_err']} passed={row['passed']} "
                      f"{row['status']}")
    rows = kept("baseline_throughput.csv", lambda r: r["arch"] in args.archs)
    dtype = "bf16-autocast" if device == "cuda" else "fp32"
    for arch in args.archs:
        start = time.time()
        row = throughput(arch, args.size, args.batch, args.train_seq_len, args.steps, args.warmup, device, args.seed)
        kernels = attention_kernels.describe(device)
        if arch not in ("transformer", "swa", "orthros"):
            kernels += "+fla-triton" if device == "cuda" else "+fla-naive"
            if arch in ("gdn", "linear_hybrid", "orthros_h") and device == "cuda":
                kernels += f"+tilelang-{_tilelang_version()}"
        rows.append({**row, **provenance(profile, args.seed, dtype, kernels, device, time.time() - start), **env})
        write_csv(rows, os.path.join(out_dir, "baseline_throughput.csv"))
        print(f"{arch:14s} {row['tokens_per_s']} tok/s {row['status']}")
    print(f"wrote {out_dir}/fla_crosscheck.csv and {out_dir}/baseline_throughput.csv")


if __name__ == "__main__":
    main()
