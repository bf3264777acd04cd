"""Orthros training under torch.compile on one GPU: eager and compiled steps, losses compared, tokens/s, memory.

The SmolLM2-135M shape (30 layers, d_model 576, 9 heads / 3 KV heads, head dim 64, vocab 49152, tied embeddings)
as a randomly initialised transformers LlamaForCausalLM, converted to Orthros (window 128) by
models.convert.transformer_to_orthros. Each variant (eager first, then one per --backends entry) starts from the same
weights and trains on the same random batches: bf16 autocast, fp32 master weights, fused AdamW, gradient clipping at
1.0, batch 16 x T 2048. After every step the script synchronises the device, so an asynchronous CUDA error (an
illegal memory access) surfaces at the step that caused it, and checks that the loss and the gradient norm are finite.
A variant that raises is reported, not fatal: the variants before it keep their numbers, and the table comes last.

  python -m benchmarks.compile_check                 # one CUDA GPU: about 2 minutes, most of it Inductor's compile
  python -m benchmarks.compile_check --backends aot_eager,inductor --llama   # more variants; HF Llama as a baseline
  python -m benchmarks.compile_check --device cpu --shape tiny --batch 2 --seq-len 64 --steps 2 --warmup 1  # smoke

Set CUDA_LAUNCH_BLOCKING=1 to have a CUDA error name the kernel that raised it (slower). Exit status 0 when every
variant ran with finite losses that agree with eager's within --loss-rtol, 1 otherwise.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
import traceback

import torch

from models import kernels
from models.convert import transformer_to_orthros
from suite.cli import device_name, nonnegative_int, positive_float, positive_int

SHAPES = {  # LlamaConfig keywords
    "smollm2": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=8192,
                    rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True),
    "tiny": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, max_position_embeddings=4096, rope_theta=100000.0,
                 rms_norm_eps=1e-5, tie_word_embeddings=True),
}


def llama(shape: str, seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**SHAPES[shape], attn_implementation="sdpa"))


def build(arch: str, shape: str, window: int, seed: int):
    """The model on the CPU in fp32 (the same weights for every variant of one arch)."""
    source = llama(shape, seed)
    return source if arch == "llama" else transformer_to_orthros(source, window_size=window)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_variant(model_cpu, name: str, backend: str | None, args, batches) -> dict:
    """Train a copy of ``model_cpu`` for warmup + steps steps; the row of the table (status "ok" or the error)."""
    device = args.device
    row = {"variant": name, "status": "ok", "losses": [], "first_step_s": None, "tokens_per_s": None,
           "peak_gib": None, "kernels": ""}
    model = opt = None
    try:
        torch._dynamo.reset()
        torch._dynamo.config.error_on_recompile = True  # a recompile across steps fails the variant
        kernels.reset_usage()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        model = _copy(model_cpu).to(device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=device.startswith("cuda"))
        call = model if backend is None else torch.compile(model, backend=backend, mode=args.mode,
                                                             fullgraph=args.fullgraph, dynamic=False)
        autocast = torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=not args.fp32)
        timed_from = None
        for step, ids in enumerate(batches):
            if step == args.warmup:
                sync(device)
                timed_from = time.perf_counter()
            start = time.perf_counter()
            with autocast:
                loss = call(input_ids=ids, labels=ids).loss
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            sync(device)  # an asynchronous CUDA error surfaces here, at the step that caused it
            value, norm = float(loss.detach()), float(norm)
            row["losses"].append(value)
            if step == 0:
                row["first_step_s"] = time.perf_counter() - start
            if not (math.isfinite(value) and math.isfinite(norm)):
                raise FloatingPointError(f"step {step}: loss {value}, gradient norm {norm}")
            print(f"[{name}] step {step}: loss {value:.5f}, grad norm {norm:.4f}, "
                  f"{time.perf_counter() - start:.3f} s", flush=True)
        elapsed = time.perf_counter() - timed_from
        row["tokens_per_s"] = args.steps * args.batch * args.seq_len / elapsed
        row["ms_per_step"] = 1e3 * elapsed / args.steps
    except Exception as err:  # a compile error, a CUDA error, out of memory, a non-finite loss
        row["status"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"[:200]
        print(f"[{name}] FAILED after {len(row['losses'])} steps:", flush=True)
        traceback.print_exc()
    finally:
        row["kernels"] = "+".join(f"{k}x{n}" for k, n in sorted(kernels.kernels_used().items()))
        try:
            if device.startswith("cuda"):
                row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        except Exception:  # a CUDA context an illegal access left unusable
            pass
        del model, opt
    return row


def _copy(model_cpu):
    import copy

    return copy.deepcopy(model_cpu)


def table(rows: list[dict], eager_losses: list[float], rtol: float) -> tuple[str, bool]:
    lines = [f"{'variant':22} {'status':8} {'tok/s':>9} {'ms/step':>8} {'1st step s':>10} {'peak GiB':>8} "
             f"{'loss first/last':>17} {'max rel dloss':>13}  kernels (eager: calls; compiled: when traced)"]
    ok = True
    for row in rows:
        losses = row["losses"]
        diffs = [abs(a - b) / abs(b) for a, b in zip(losses, eager_losses)]
        rel = max(diffs) if diffs and row["variant"].startswith("orthros") else None
        good = row["status"] == "ok" and (rel is None or rel <= rtol)
        ok &= good
        status = "ok" if good else ("loss" if row["status"] == "ok" else "FAILED")

        def fmt(value, spec):
            return "-" if value is None else format(value, spec)

        span = f"{losses[0]:.4f}/{losses[-1]:.4f}" if losses else "-"
        lines.append(f"{row['variant']:22} {status:8} {fmt(row['tokens_per_s'], '9.0f')} "
                     f"{fmt(row.get('ms_per_step'), '8.1f')} {fmt(row['first_step_s'], '10.1f')} "
                     f"{fmt(row['peak_gib'], '8.1f')} {span:>17} {fmt(rel, '13.2e')}  {row['kernels']}")
        if row["status"] != "ok":
            lines.append(f"{'':22} -> {row['status']}")
    return "\n".join(lines), ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=device_name, default="cuda")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="smollm2")
    ap.add_argument("--window", type=positive_int, default=128)
    ap.add_argument("--batch", type=positive_int, default=16)
    ap.add_argument("--seq-len", type=positive_int, default=2048)
    ap.add_argument("--steps", type=positive_int, default=8, help="timed steps per variant (default 8)")
    ap.add_argument("--warmup", type=nonnegative_int, default=2,
                    help="untimed steps first; the compile happens in the first")
    ap.add_argument("--backends", default="inductor", help="comma list of torch.compile backends, each a variant "
                    "after eager (default inductor; '' for eager only)")
    ap.add_argument("--mode", default=None, help="torch.compile mode (default: none, e.g. max-autotune-no-cudagraphs)")
    ap.add_argument("--no-fullgraph", dest="fullgraph", action="store_false",
                    help="allow graph breaks (default: fullgraph=True, a graph break is an error)")
    ap.add_argument("--llama", action="store_true", help="also train the HF Llama source (eager and compiled)")
    ap.add_argument("--fp32", action="store_true", help="no bf16 autocast")
    ap.add_argument("--lr", type=positive_float, default=3e-4)
    ap.add_argument("--loss-rtol", type=positive_float, default=2e-2,
                    help="largest relative difference of a compiled step's loss from eager's (default 0.02)")
    ap.add_argument("--seed", type=nonnegative_int, default=0)
    args = ap.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device here (use --device cpu for a smoke run)")

    import transformers

    gpu = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "absent"
    print(f"torch {torch.__version__}, triton {triton_version}, transformers {transformers.__version__}, {gpu}; "
          f"kernels: {kernels.describe(device)}", flush=True)
    g = torch.Generator().manual_seed(args.seed + 1)
    vocab = SHAPES[args.shape]["vocab_size"]
    batches = [torch.randint(0, vocab, (args.batch, args.seq_len), generator=g).to(device)
               for _ in range(args.warmup + args.steps)]
    rows = []
    started = time.perf_counter()
    for arch in ["orthros"] + (["llama"] if args.llama else []):
        model_cpu = build(arch, args.shape, args.window, args.seed)
        n_params = sum(p.numel() for p in model_cpu.parameters())
        print(f"{arch}: {n_params / 1e6:.1f}M parameters, batch {args.batch} x T {args.seq_len}"
              + (f", window {args.window}" if arch == "orthros" else ""), flush=True)
        for backend in [None] + backends:
            rows.append(run_variant(model_cpu, f"{arch} {backend or 'eager'}", backend, args, batches))
        del model_cpu
    eager_losses = next(r["losses"] for r in rows if r["variant"] == "orthros eager")
    text, ok = table(rows, eager_losses, args.loss_rtol)
    print(f"\n{args.shape} shape, batch {args.batch} x T {args.seq_len}, "
          f"{'fp32' if args.fp32 else 'bf16 autocast'}, {args.warmup} warm-up + {args.steps} timed steps, {gpu}, "
          f"torch {torch.__version__}; total {time.perf_counter() - started:.0f} s")
    print(text, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
