"""GPU check for the Orthros kernels: CUDA backends vs the CPU (blocked, fp32) path on random weights.

Two levels, at T = 4K and 32K (Qwen3-8B attention shapes: 32 query heads, 8 KV heads, head dim 128):

* kernel: each CUDA kernel (``sdpa-flash`` full causal, ``sdpa-flash`` single query, ``fla-window``
  window 128, ``flash-attn`` if importable) in bf16 against the CPU path's code (the blocked kernel)
  run in fp32 on the same GPU (fp32 on the CPU would take minutes for full causal at 32K);
* model: a random-weight Orthros (size ``25M``, w=128) Prefill (T_out = 1) and PT logits in bf16 on
  CUDA against fp32 on the CPU.

Error is ||out - ref|| / ||ref|| (relative Frobenius) and max |out - ref|. Writes
``<out>/orthros_gpu_check.csv`` with provenance. Usage::

    python -m suite.bench.gpu_check_orthros --out results/gpu [--lengths 4096,32768]
"""
from __future__ import annotations

import argparse
import time

import torch

from models import backend
from models.registry import build
from suite.bench.gpu_common import errors
from suite.common import int_list
from suite.provenance import provenance, software_versions, write_csv

TOLERANCE_BF16 = 2e-2  # relative error budget for bf16 operands (METHOD.md: 1e-3 .. 1e-2 typical)


def kernel_rows(T: int, device: str) -> list[dict]:
    torch.manual_seed(T)
    H, Hkv, d = 32, 8, 128
    q = torch.randn(1, H, T, d)
    k, v = torch.randn(1, Hkv, T, d), torch.randn(1, Hkv, T, d)
    idx = torch.arange(T)
    cases = [("full causal", idx, None, slice(None)), ("window 128", idx, 128, slice(None)),
             ("single query", idx[-1:], None, slice(T - 1, T))]
    rows = []
    for name, q_index, window, rows_sel in cases:
        backend.force_kernel("blocked")
        ref = backend.attention(*(t.to(device) for t in (q[:, :, rows_sel], k, v, q_index)), window)
        backend.force_kernel(None)
        backend.reset_usage()
        dq, dk, dv = (t.to(device, torch.bfloat16) for t in (q[:, :, rows_sel], k, v))
        out = backend.attention(dq, dk, dv, q_index.to(device), window)
        if out.is_cuda:
            torch.cuda.synchronize()
        kernel = ",".join(backend.kernels_used())
        rows.append({"level": "kernel", "case": name, "seq_len": T, "kernel": kernel, **errors(out.cpu(), ref.cpu())})
    return rows


def model_rows(T: int, device: str) -> list[dict]:
    torch.manual_seed(0)
    model = build("orthros", "25M", vocab_size=4096, max_position_embeddings=max(T, 4096), window_size=128).eval()
    ids = torch.randint(0, 4096, (1, T))
    rows = []
    with torch.inference_mode():
        backend.force_kernel("blocked")
        ref_prefill = model(ids, logits_to_keep=1).logits
        ref_pt = model(ids[:, :4096]).logits if T <= 4096 else None
        backend.force_kernel(None)
        gpu = model.to(device, torch.bfloat16)
        backend.reset_usage()
        out = gpu(ids.to(device), logits_to_keep=1).logits
        rows.append({"level": "model", "case": "prefill logits (T_out=1)", "seq_len": T,
                     "kernel": ",".join(backend.kernels_used()), **errors(out.cpu(), ref_prefill.cpu())})
        if ref_pt is not None:
            backend.reset_usage()
            out = gpu(ids[:, :4096].to(device)).logits
            rows.append({"level": "model", "case": "PT logits (T_out=T)", "seq_len": T,
                         "kernel": ",".join(backend.kernels_used()), **errors(out.cpu(), ref_pt.cpu())})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="results/gpu")
    parser.add_argument("--lengths", default="4096,32768")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("--device cuda asked for, but torch sees no CUDA device")
    start = time.time()
    rows = []
    for T in int_list(args.lengths, "--lengths"):
        rows += kernel_rows(T, args.device) + model_rows(T, args.device)
    prov = provenance("gpu", 0, "bf16 vs fp32 CPU reference", backend.describe(args.device), args.device,
                      time.time() - start)
    extra = {**software_versions(args.device), "tolerance_rel": TOLERANCE_BF16}
    for row in rows:
        row.update(prov, **extra, passed=row["rel_err"] <= TOLERANCE_BF16)
    path = write_csv(rows, f"{args.out}/orthros_gpu_check.csv")
    for row in rows:
        print(f"{row['level']:6} {row['case']:26} T={row['seq_len']:6} {row['kernel']:22} "
              f"rel={row['rel_err']:.2e} max={row['max_abs_err']:.2e} pass={row['passed']}")
    print("wrote", path)


if __name__ == "__main__":
    main()
