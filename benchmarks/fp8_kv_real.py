"""FP8 against bf16 K/V on real weights: the conversion experiment's pretrained model as Orthros, held-out English.

The FP8 check of the 1M-token prefill (:mod:`benchmarks.prefill_1m`) runs on random weights, whose top-2 logits
nearly tie, so that almost any rounding flips the top-1 token. This check repeats it on the pretrained base model
of the conversion experiment (``conversion.base_model``, prepared by :mod:`suite.train.base_model`: SmolLM2-135M by
default), converted by :func:`models.convert.transformer_to_orthros` at ``--window`` with identity scale-offset and
no training. The text is the held-out split of the English data (:mod:`suite.data.english`): its first ``--tokens``
tokens, documents packed with their end-of-text separator, cut into sequences of T tokens for each T of
``--lengths`` (up to the model's positions); a sequence's targets are its next tokens, the token after it included,
so every position is scored.

Each arm is one prefill of :class:`models.runtime.prefill.PrefillRunner` with ``n_out = T`` (the output stream at
every position, i.e. every prediction; both streams read the K/V from the store), differing only in the store it
writes (``PrefillRunner.new_kv``):

* ``<dtype> K/V``: :class:`models.runtime.kv.DenseKV` in the model dtype;
* ``bf16 K/V``: stored in bf16, read back in the model dtype (the same arm as the previous one for a bf16 model);
* ``fp8 K/V (block B)``: :class:`models.runtime.kv.FP8KV`, e4m3 with one fp32 scale per (KV head, B tokens), for
  each B of ``--fp8-blocks``;

and ``model forward``: the model's own forward (K/V in the model dtype, no store), for the path floor.

Rows of ``fp8_kv_real.csv``, one per (T, comparison of a test arm against a reference arm) over every predicted
position of the T's sequences: top-1 agreement of the logits, the perplexity of each and its relative change
(``ppl_test / ppl_ref - 1``), max |dlogit|, the reference logits' RMS, their ratio and the relative Frobenius error;
the 95% intervals are batch means over blocks of ``--ci-block`` consecutive positions (normal approximation).
Comparisons (``comparison``): ``path floor`` (the runner against the model forward, same K/V precision: two
implementations), ``bf16 rounding`` (bf16 against model-dtype K/V, float32 models), ``fp8 check`` (fp8 against bf16
K/V) and ``fp8 vs <dtype>`` (float32 models).

Pass/fail rows go into ``targets.csv`` beside it, per T: the path check (top-1 agreement of the path floor >= 0.99: the
measurement sees agreement where nothing changed; a failed one voids that T's FP8 targets) and per block the targets
fp8 vs bf16 K/V top-1 agreement >= 0.99 and |perplexity change| < 1%.

CLI (GPU, bf16 model): ``python -m benchmarks.fp8_kv_real --base work_dirs/gpu/models/base --data-dir
work_dirs/gpu/data/english --out-dir results/gpu``; CPU: ``--device cpu`` (a float32 model with bf16 as the K/V
reference; ``--dtype bfloat16`` for bf16 throughout).
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from benchmarks.gpu_common import RowWriter, common_columns, free
from suite.cli import device_name, in_folder, out_folder, positive_int, positive_ints, usage_errors
from suite.common import DTYPES

CSV = "fp8_kv_real.csv"
TOP1_MIN, PPL_MAX = 0.99, 0.01
Z95 = 1.96
ROWS = 1024  # logit rows compared at a time (bounded temporaries at 8K x 49K)


def packed(tokens: np.ndarray, T: int, n_tokens: int) -> list[np.ndarray]:
    """The first ``n_tokens // T`` sequences of ``T`` tokens of ``tokens``, each with the token after it: int64
    arrays of ``T + 1`` (inputs ``[:-1]``, targets ``[1:]``). ValueError when ``tokens`` holds fewer than one."""
    n = n_tokens // T
    if n < 1 or len(tokens) < n * T + 1:
        raise ValueError(f"{len(tokens)} tokens do not hold {max(n, 1)} sequence(s) of {T} + 1")
    return [np.asarray(tokens[s * T:s * T + T + 1], dtype=np.int64) for s in range(n)]


def interval(values: np.ndarray, block: int) -> tuple[float, float]:
    """Mean of ``values`` [n] and the half width of its 95% interval from the means of consecutive blocks of
    ``block`` (nan with fewer than 2 blocks)."""
    nb = len(values) // block
    if nb < 2:
        return float(values.mean()), math.nan
    means = values[:nb * block].reshape(nb, block).mean(axis=1)
    return float(values.mean()), Z95 * float(means.std(ddof=1)) / math.sqrt(nb)


class Tally:
    """One comparison of test logits against reference logits, over sequences: per-position top-1 agreement and
    each one's NLL, and the sums behind max |dlogit|, the reference RMS and the relative error."""

    def __init__(self):
        self.agree, self.nll_test, self.nll_ref = [], [], []
        self.max_abs, self.sq_diff, self.sq_ref, self.n, self.finite = 0.0, 0.0, 0.0, 0, True

    def add(self, test: torch.Tensor, ref: torch.Tensor, targets: torch.Tensor) -> None:
        """Logits ``[T, vocab]`` of one sequence and its targets [T], compared ``ROWS`` positions at a time."""
        for s in range(0, test.shape[0], ROWS):
            x, y, t = test[s:s + ROWS].float(), ref[s:s + ROWS].float(), targets[s:s + ROWS]
            self.agree.append((x.argmax(-1) == y.argmax(-1)).cpu().numpy())
            self.nll_test.append(F.cross_entropy(x, t, reduction="none").double().cpu().numpy())
            self.nll_ref.append(F.cross_entropy(y, t, reduction="none").double().cpu().numpy())
            d = (x - y).double()
            self.max_abs = max(self.max_abs, float(d.abs().max()))
            self.sq_diff += float(d.pow(2).sum())
            self.sq_ref += float(y.double().pow(2).sum())
            self.n += y.numel()
            self.finite &= bool(torch.isfinite(x).all())

    def row(self, block: int) -> dict:
        agree, nll_t, nll_r = (np.concatenate(a) for a in (self.agree, self.nll_test, self.nll_ref))
        top1, top1_hw = interval(agree.astype(np.float64), block)
        diff, diff_hw = interval(nll_t - nll_r, block)
        rms = math.sqrt(self.sq_ref / self.n)
        return {"n_positions": len(agree), "top1_agreement": top1, "top1_lo": max(0.0, top1 - top1_hw),
                "top1_hi": min(1.0, top1 + top1_hw), "ppl_ref": math.exp(nll_r.mean()),
                "ppl_test": math.exp(nll_t.mean()),
                "ppl_rel_change": math.expm1(diff), "ppl_rel_lo": math.expm1(diff - diff_hw),
                "ppl_rel_hi": math.expm1(diff + diff_hw), "max_abs_dlogit": self.max_abs, "logit_rms": rms,
                "max_abs_over_rms": self.max_abs / rms, "rel_err": math.sqrt(self.sq_diff / self.sq_ref),
                "finite": self.finite}


def arrive(tallies: dict, held: dict, name: str, logits: torch.Tensor, targets: torch.Tensor) -> None:
    """Hold arm ``name``'s ``logits`` and add them to every comparison ``(what, test, ref)`` of ``tallies`` whose
    other arm is held."""
    held[name] = logits
    for (_, test, ref), tally in tallies.items():
        if name in (test, ref) and test in held and ref in held:
            tally.add(held[test], held[ref], targets)


def converted_model(base_dir: str | Path, window: int, device, dtype):
    """The base model folder's model converted to Orthros at ``window`` (identity scale-offset), in eval mode."""
    from models.convert import transformer_to_orthros
    from suite.train.convert_base import load_base

    source = load_base(base_dir)
    model = transformer_to_orthros(source, window_size=window)
    del source
    return model.to(device=device, dtype=dtype).eval()


def check_inputs(base: Path, data: Path, split: str, lengths: list[int], n_tokens: int) -> tuple[dict, np.ndarray]:
    """(the base model's record, the split's tokens); ValueError / FileNotFoundError naming the option, file or
    value that does not fit."""
    from suite.data.tokenizer import check_data_dir, load_tokens
    from suite.train.base_model import read_record

    record = read_record(base)
    check_data_dir(data, (split,))
    if (data / "tokenizer" / "tokenizer.json").read_bytes() != (base / "tokenizer.json").read_bytes():
        raise ValueError(f"--data-dir {data} is encoded with another tokenizer than --base {base} "
                         f"(tokenizer.json differs): prepare it with python -m suite.data.english --base-model {base}")
    limit = record.get("max_position_embeddings")
    if limit and max(lengths) > limit:
        raise ValueError(f"--lengths {max(lengths)} exceeds the model's {limit} positions")
    if n_tokens < max(lengths):
        raise ValueError(f"--tokens {n_tokens} is shorter than the longest of --lengths ({max(lengths)})")
    tokens = load_tokens(data, split)
    if len(tokens) < n_tokens + 1:
        raise ValueError(f"--tokens {n_tokens}: the {split} split ({data / 'tokens' / split}.npy) holds only "
                         f"{len(tokens)}")
    return record, tokens


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, type=in_folder,
                    help="base model folder (python -m suite.train.base_model)")
    ap.add_argument("--data-dir", required=True, type=in_folder,
                    help="English data folder encoded with the base model's tokenizer (python -m suite.data.english)")
    ap.add_argument("--split", default="test", choices=["val", "test"], help="held-out split read")
    ap.add_argument("--window", type=positive_int, default=128, help="Orthros window of the conversion (default 128)")
    ap.add_argument("--lengths", type=positive_ints, default=[1024, 2048, 4096, 8192],
                    help="sequence lengths T, comma-separated (default 1024,2048,4096,8192)")
    ap.add_argument("--tokens", type=positive_int, default=32768,
                    help="held-out tokens read at every T (the first ones of the split; tokens // T sequences; "
                         "default 32768)")
    ap.add_argument("--fp8-blocks", type=positive_ints, default=[4096],
                    help="tokens per FP8 scale (per KV head), comma-separated: one FP8 check each (default 4096, "
                         "the 1M-token run's)")
    ap.add_argument("--ci-block", type=positive_int, default=256,
                    help="positions per batch mean of the 95%% CIs (default 256)")
    ap.add_argument("--device", type=device_name, default="cuda", help="cuda (default), or cpu for a slow float32 run")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default=None,
                    help="model dtype (default: bfloat16 on cuda, float32 on cpu)")
    ap.add_argument("--compiled", choices=("auto", "on", "off"), default="auto",
                    help="the runner's fused functions compiled (auto: on cuda)")
    ap.add_argument("--threads", type=positive_int, default=None, help="torch intra-op threads (cpu)")
    ap.add_argument("--profile", default="gpu", help="the profile the rows record (default gpu)")
    ap.add_argument("--out-dir", type=out_folder, default="results/gpu",
                    help="where fp8_kv_real.csv and targets.csv are written (default results/gpu)")
    args = ap.parse_args(argv)
    base, data = Path(args.base), Path(args.data_dir)
    with usage_errors(ap, ValueError, FileNotFoundError):
        record, tokens = check_inputs(base, data, args.split, args.lengths, args.tokens)
        if bad := [T for T in args.lengths if T % args.ci_block]:
            raise ValueError(f"--lengths {bad} must be multiples of --ci-block {args.ci_block}")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype_name = args.dtype or ("bfloat16" if device.type == "cuda" else "float32")
    dtype = DTYPES[dtype_name]
    compiled = device.type == "cuda" if args.compiled == "auto" else args.compiled == "on"
    from models import kernels
    from models.runtime.prefill import PrefillRunner

    start = time.perf_counter()
    model = converted_model(base, args.window, device, dtype)
    runner = PrefillRunner(model, compiled=compiled)
    writer = RowWriter(Path(args.out_dir) / CSV, common_columns(device, dtype_name, args.profile))
    # the arms by name; the FP8 check's reference is "bf16 K/V" (the dense arm itself in a bf16 model)
    dense = "bf16 K/V" if dtype == torch.bfloat16 else "fp32 K/V"
    forward, bf16 = f"model forward ({dense})", "bf16 K/V"
    fp8 = {b: f"fp8 K/V (block {b})" for b in args.fp8_blocks}
    pairs = [("path floor", dense, forward)]  # (comparison, test arm, reference arm)
    if dense != bf16:
        pairs.append(("bf16 rounding", bf16, dense))
    for name in fp8.values():
        pairs += [("fp8 check", name, bf16)] + ([(f"fp8 vs {dense.split()[0]}", name, dense)] if dense != bf16 else [])
    common = {"base_model": record["name"], "quantization": record.get("quantization"), "arch": "orthros",
              "window": args.window, "split": args.split, "tokens": args.tokens, "threads": torch.get_num_threads(),
              "path": "compiled" if compiled else "eager"}
    print(f"[fp8_kv_real] {record['name']} -> Orthros w={args.window}, {dtype_name} on {device}, "
          f"loaded in {time.perf_counter() - start:.0f}s", flush=True)

    for T in args.lengths:
        seqs = packed(tokens, T, args.tokens)
        tallies = {pair: Tally() for pair in pairs}
        used: set[str] = set()
        t0 = time.perf_counter()
        for seq in seqs:
            ids = torch.as_tensor(seq[:-1], device=device)[None]
            targets = torch.as_tensor(seq[1:], device=device)
            held: dict[str, torch.Tensor] = {}  # logits [T, vocab] of the arms still needed as references
            with torch.inference_mode():  # one arm at a time, compared as it comes: at most 3 logit tensors held
                kernels.reset_usage()
                arrive(tallies, held, forward, model(input_ids=ids).logits[0], targets)
                used |= set(kernels.kernels_used())
                out = runner.run(ids, n_out=T)
                used |= set(out.kernels)
                arrive(tallies, held, dense, out.logits[0], targets)
                del out, held[forward]
                if dense != bf16:
                    arrive(tallies, held, bf16, runner.run(ids, n_out=T, kv=runner.new_kv(1, T, "bf16")).logits[0],
                           targets)
                for b, name in fp8.items():
                    arrive(tallies, held, name, runner.run(ids, n_out=T, kv=runner.new_kv(1, T, "fp8", b)).logits[0],
                           targets)
                    del held[name]
            held.clear()
            free(device)
        s_per_seq = (time.perf_counter() - t0) / len(seqs)
        floor = None
        for (what, test, ref), tally in tallies.items():
            row = writer.add(**common, seq_len=T, n_seqs=len(seqs), comparison=what, test=test, reference=ref,
                             fp8_block=next((b for b, n in fp8.items() if n == test), None),
                             **tally.row(args.ci_block), kernel="+".join(sorted(used)), s_per_seq=s_per_seq,
                             status="ok" if tally.finite else "fail: non-finite logits")
            print(f"[fp8_kv_real] T={T} {what}: {test} vs {ref}: top-1 {row['top1_agreement']:.4f}, ppl "
                  f"{row['ppl_ref']:.3f} -> {row['ppl_test']:.3f} ({100 * row['ppl_rel_change']:+.2f}%), "
                  f"max |dlogit| {row['max_abs_dlogit']:.3f} = {row['max_abs_over_rms']:.3f} x RMS", flush=True)
            label = f"T={T}, {len(seqs)} x {T} held-out tokens, {record['name']} -> Orthros w={args.window}"
            if what == "path floor":
                floor = row["top1_agreement"]
                writer.target(arch="orthros", method="path check", target=f"prefill runner vs model forward "
                              f"({dense}): top-1 agreement ({label}) >= {TOP1_MIN}", value=floor,
                              threshold=TOP1_MIN, status="pass" if floor >= TOP1_MIN else "fail", seq_len=T)
            elif what == "fp8 check":
                void = None if floor >= TOP1_MIN else f"void: the path check failed (top-1 {floor:.4f})"
                top1, dppl = row["top1_agreement"], abs(row["ppl_rel_change"])
                writer.target(arch="orthros", method="target", value=top1, threshold=TOP1_MIN, seq_len=T,
                              target=f"{test} vs {ref}: top-1 agreement ({label}) >= {TOP1_MIN}",
                              status=void or ("pass" if top1 >= TOP1_MIN else "fail"))
                writer.target(arch="orthros", method="target", value=dppl, threshold=PPL_MAX, seq_len=T,
                              target=f"{test} vs {ref}: |perplexity change| ({label}) < {PPL_MAX}",
                              status=void or ("pass" if dppl < PPL_MAX else "fail"))
        free(device)
    print(f"[fp8_kv_real] wrote {writer.path} in {time.perf_counter() - start:.0f}s", flush=True)
    return writer.rows


if __name__ == "__main__":
    main()
