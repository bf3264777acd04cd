#!/usr/bin/env bash
# The system benchmarks on one H200 in ONE command of < 10 minutes (TOTAL_S, default 540 s, caps it), for a host
# whose commands are limited in time: the command of the DAG's rule perf (workflows/bench.smk), which runs it with
# OUT=<results>/perf/<PART>, PART, SMOKE (1 in a CPU profile) and PYTHON; on a host without internet access
# tools/offline_gpu/run.sh runs that rule (TARGETS=results/gpu/perf/main) with the wheels built elsewhere and packs
# what it wrote for copying back. Every step writes its CSV row by row straight into $OUT, logs to $OUT/<step>.log
# and its exit status to $OUT/steps.tsv, so a step cut by its cap (or a command killed at the wall) keeps what it
# measured; its pass/fail rows go to $OUT/targets.csv. Rows carry the provenance columns (commit = $SUITE_COMMIT,
# profile, device, backend, dtype, seed, wall_s) and the software / GPU columns (gpu_name, driver, torch, triton,
# transformers, fla).
#
# Steps of PART=main (the default), most valuable first; GPU seconds estimated from the committed H200 numbers
# (results/gpu/) and the predictions in docs/performance.md, compile and autotune included:
#   0. setup          ~5 s  env.log
#   1. attn_kernels  ~55 s  (cap 90) every attention kernel vs the blocked reference (fp32) at 4K and 64K: key lengths
#                           past 65,536, chunked T_q != T_k with/without window (bottom-right), one query, the decode
#                           step over a token-major cache, and two engine checks (chunked prefill; FA2 decode); then
#                           timings at 128K (budget 40 s) -> attention_kernels.csv, attn_choice.json (fastest
#                           verified full / window kernel, fa2_ok). A failing kernel is taken out of service
#                           (SUITE_DISABLE_KERNELS) and the run goes on (ON_KERNEL_FAIL=stop: the command stops)
#   2. prefill_gpu  ~190 s  (cap 230) rates (8192^3 matmul, layer GEMMs, copy bandwidth) -> rates.json; fused
#                           (torch.compile) path vs model forward at 4K; eager vs fused at 32K (path selection, one
#                           Inductor compile per model); then 128K FIRST (Orthros vs Transformer on the faster path,
#                           the other path again for comparison), 64K..8K, one layer x 36 at 256K (512K/1M one-layer
#                           rows carried over from results/gpu/prefill.csv); targets: 128K speedup >= 4.0, Orthros
#                           MFU >= 0.80, cost model within 15% -> prefill.csv
#   3. decode_step  ~130 s  (cap 150) engine (fused compiled functions, FA2 decode if verified, CUDA graphs) at batch 2,
#                           127K/1K for Orthros then the Transformer: decode step vs HBM bound (target <= 1.3 per
#                           model), kernels per step, compiled-vs-eager check, TTFT of one prefill -> e2e.csv
#   4. train_step    ~30 s  (cap 45) Orthros PT vs Transformer training step at T=4096, 12M and 25M
#                           (target <= 2.1x) -> train_step.csv
#   5. cost_model    ~13 s  (cap 45) predictions with this machine's rates -> cost_model.csv
#   6. prefill_1m    ~90 s  (whatever is left, at least 45 s) LAST: the 1,048,576-token Orthros prefill with an FP8
#                           K/V cache ("completes" target row written as soon as it finishes), then FP8 vs bf16 K/V
#                           logits at 128K (top-1 >= 0.99, max |dlogit| <= 0.4 x RMS) -> prefill_1m_fp8.csv
#   Expected total ~8 min; what does not fit leaves "not run: time budget" rows or a "skipped" line in steps.tsv.
# Optional further commands (each standalone, each < 10 min, each into its own $OUT):
#   PART=table4  Table 4 re-measured for Transformer and Orthros: 3 configs, TTFT = median of 3 prefills (~8.5 min)
#   PART=hybrids Table 4 for Orthros-H and Linear Hybrid (FLA's GDN JIT ~65 s once; the cap may cut Linear Hybrid)
#   PART=load    decode under load: Orthros vs Transformer decode step against batch at 2K..128K contexts (compiled
#                fused step, FA2 and matmul decode attention, each phase also timed alone), each cell predicted by
#                the cost model first (benchmarks.decode_load; rates from results/gpu/rates.json unless this OUT
#                holds one; ~7 min) -> decode_load.csv
#   PART=all     everything in one go (the CPU smoke test; ~30 GPU minutes, so for a host without a time cap)
# Then, locally: python -m benchmarks.merge_results --into results/gpu OUT_MAIN [OUT_TABLE4 [OUT_HYBRIDS]]
#
# Environment: SUITE_COMMIT: the commit the rows record, where the host's copy has no .git. SMOKE=1: the same steps
#   on the CPU at tiny size (tests/test_perf_all.py); PYTHON picks the interpreter; TOTAL_S: the whole command's cap
#   in seconds, lowered to what is left before SUITE_DEADLINE (seconds since the epoch by which the command must be
#   done; run.sh sets it under its TIME_CAP); ON_KERNEL_FAIL=stop: exit 3 after a failed kernel check (the job
#   fails then, and snakemake deletes the part's folder unless run with --keep-incomplete; its log keeps the output).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
OUT=${OUT:-results/gpu_perf}
PART=${PART:-main}
SMOKE=${SMOKE:-0}
TOTAL_S=${TOTAL_S:-540}
ON_KERNEL_FAIL=${ON_KERNEL_FAIL:-continue}
[[ "$PART" =~ ^(main|table4|hybrids|load|all)$ ]] \
  || { echo "PART must be main, table4, hybrids, load or all, got '$PART'" >&2; exit 2; }
if [[ -n "${SUITE_DEADLINE:-}" ]] && (( SUITE_DEADLINE - $(date +%s) < TOTAL_S )); then
  TOTAL_S=$(( SUITE_DEADLINE - $(date +%s) ))  # the caller's own cap (run.sh's TIME_CAP) comes first
fi
mkdir -p "$OUT"
STEPS="$OUT/steps.tsv"
[[ -f "$STEPS" ]] || printf 'step\texit\tseconds\n' > "$STEPS"
if [[ -z "${SUITE_COMMIT:-}" ]]; then  # a copy of the tree without .git: the caller must say
  SUITE_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  echo "== SUITE_COMMIT not set: rows record commit '$SUITE_COMMIT'" | tee -a "$OUT/env.log"
fi
export SUITE_COMMIT

left() { echo $(( TOTAL_S - SECONDS )); }
# cap WANT [RESERVE]: WANT seconds, at most what is left after RESERVE seconds kept for later steps
cap() { local want=$1 l; l=$(( $(left) - ${2:-0} )); (( l < want )) && want=$l; (( want < 1 )) && want=1; echo "$want"; }
# step NAME WANT RESERVE MIN cmd...: run under a time cap (SIGTERM, then SIGKILL 10 s later), log to $OUT/NAME.log,
# record the exit status; skipped (exit "skipped") when fewer than MIN seconds are left after RESERVE
step() {
  local name=$1 want=$2 reserve=$3 min=$4 t0=$SECONDS rc c; shift 4
  c=$(cap "$want" "$reserve")
  if (( $(left) - reserve < min )); then
    echo "== $name: skipped, $(left)s left (needs $min s, $reserve s kept for later steps)"
    printf '%s\t%s\t%s\n' "$name" skipped 0 >> "$STEPS"
    return 124
  fi
  echo "== $name ($(left)s left, cap ${c}s)"
  timeout -k 10 "$c" "$@" 2>&1 | tee "$OUT/$name.log"
  rc=${PIPESTATUS[0]}
  printf '%s\t%s\t%s\n' "$name" "$rc" $(( SECONDS - t0 )) >> "$STEPS"
  (( rc == 124 || rc == 137 )) && echo "== $name: cut by its time cap (rows written so far are kept)"
  return "$rc"
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null \
    || echo "no nvidia-smi"
  $PY -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  $PY -c "import triton; print('triton', triton.__version__)" 2>/dev/null || echo "triton absent"
  $PY -c "import fla; print('fla', fla.__version__)" 2>/dev/null || echo "fla absent: the window kernel falls back"
  $PY -c "import transformers; print('transformers', transformers.__version__)"
  $PY -c "from models import kernels; print('backend', kernels.describe('cuda'), 'fa2 op', kernels._fa2_available())"
  echo "PART=$PART SMOKE=$SMOKE TOTAL_S=$TOTAL_S SUITE_COMMIT=$SUITE_COMMIT"
} 2>&1 | tee -a "$OUT/env.log"

if [[ "$SMOKE" == 1 ]]; then
  DEV=(--device cpu)
  AK=(--smoke)
  PG=(--dtype float32 --size 1M --lengths 128,64 --layer-lengths 256 --matmul-n 64 --window 8 --ffn-chunk 64
      --repeats 1 --select-len 64 --compare-lens 128 --compile-backend eager)
  P1=(--smoke --seq-len 512 --check-len 256 --n-out 32 --chunk 128 --fp8-block 64 --compile-backend eager)
  E2E=(--dtype float32 --size 1M --bucket 16 --chunk 8 --window 8 --check-steps 6 --full-decode-max 4 --sample-steps 2
       --compiled on --compile-backend eager)
  DECODE=(--configs 40/12) TABLE4=(--configs 40/3,30/12) HYB=(--configs 40/3)
  TS=(--sizes 1M --seq-len 64 --batch 1 --steps 1 --warmup 1)
  DL=(--dtype float32 --size 1M --contexts 64,128 --batches 1,2 --steps 2 --repeats 1 --paths eager,compiled
      --decode-attn fa2,matmul --phases --compile-backend eager)
else
  DEV=(--device cuda)
  AK=(--budget-s 40)
  # 128K first: if the budget runs out, what is lost is the short lengths
  PG=(--lengths 131072,65536,32768,16384,8192 --layer-lengths 262144)
  P1=()
  E2E=(--full-decode-max 128)
  DECODE=(--configs 130048/1024) TABLE4=() HYB=()
  TS=(--sizes 12M,25M --seq-len 4096 --batch 4)
  DL=(--contexts 2048,8192,131072,32768 --paths compiled --decode-attn fa2,matmul --phases)
fi
CHOICE="$OUT/attn_choice.json"
FA2_FLAGS=(--decode-attn auto)
[[ "$SMOKE" == 1 ]] && FA2_FLAGS=(--decode-attn fa2)  # the CPU runs decode_attention's reference path

kernel_check() {  # $1: cap in seconds; the rest: extra arguments of attn_kernels
  step attn_kernels "$1" 0 20 $PY -m benchmarks.attn_kernels "${DEV[@]}" "${AK[@]}" --out-dir "$OUT" "${@:2}"
  local rc=$?
  if (( rc == 3 )); then
    echo "== KERNEL CHECK FAILED (see $OUT/attn_kernels.log and attention_kernels.csv)."
    if [[ "$ON_KERNEL_FAIL" == stop ]]; then
      echo "== ON_KERNEL_FAIL=stop: stopping"
      exit 3
    fi
    SUITE_DISABLE_KERNELS=$($PY -c "import json; print(','.join(json.load(open('$CHOICE')).get('failed', [])))" \
      2>/dev/null || echo torch-fa2)
    export SUITE_DISABLE_KERNELS
    echo "== going on; kernels out of service: '${SUITE_DISABLE_KERNELS}'; matmul decode attention"
    FA2_FLAGS=(--decode-attn matmul)
  elif (( rc != 0 )); then
    echo "== attn_kernels exited $rc: going on with the default kernel order and matmul decode attention"
    rm -f "$CHOICE"
    FA2_FLAGS=(--decode-attn matmul)
  fi
  CHOICE_ARG=()  # no choice file (the check failed): the default kernel order
  [[ -f "$CHOICE" ]] && CHOICE_ARG=(--attn-choice "$CHOICE")
}
rates() { RATES=(); [[ -f "$OUT/rates.json" ]] && RATES=(--rates "$OUT/rates.json"); }
committed_rates() { rates; [[ ${#RATES[@]} == 0 && -f results/gpu/rates.json ]] && RATES=(--rates results/gpu/rates.json); }
budget() { echo $(( $(cap "$1" "${2:-0}") - 30 )); }  # a step's own --budget-s: its cap less start-up and the targets

if [[ "$PART" == main || "$PART" == all ]]; then
  kernel_check 90
  step prefill_gpu 230 0 60 $PY -m benchmarks.prefill_gpu "${DEV[@]}" "${PG[@]}" --paths eager,compiled \
    "${CHOICE_ARG[@]}" --keep-from results/gpu/prefill.csv --out-dir "$OUT" --budget-s "$(budget 230)"
  rates
  step decode_step 150 0 40 $PY -m benchmarks.e2e_gpu "${DEV[@]}" "${E2E[@]}" "${DECODE[@]}" --archs orthros,transformer \
    --ttft-repeats 1 --fused on "${FA2_FLAGS[@]}" "${CHOICE_ARG[@]}" "${RATES[@]}" --out-dir "$OUT" \
    --budget-s "$(budget 150)"
  # 60 s stay reserved for the 1M prefill while the two short steps run
  step train_step 45 60 15 $PY -m benchmarks.train_step "${DEV[@]}" "${TS[@]}" --out-dir "$OUT"
  step cost_model 45 60 5 $PY -m suite.cost_model --out "$OUT/cost_model.csv" "${RATES[@]}"
  step prefill_1m 600 5 45 $PY -m benchmarks.prefill_1m "${DEV[@]}" "${P1[@]}" "${CHOICE_ARG[@]}" \
    --prefill-csv "$OUT/prefill.csv" "${RATES[@]}" --out-dir "$OUT"
fi

if [[ "$PART" == table4 || "$PART" == hybrids ]]; then  # this machine's kernels, checked again (no timings)
  FROM=()
  [[ -f results/gpu/attn_choice.json ]] && FROM=(--choice-from results/gpu/attn_choice.json)
  kernel_check 60 --checks-only "${FROM[@]}"
fi
if [[ "$PART" == table4 || "$PART" == all ]]; then
  rates
  step e2e_table4 600 0 60 $PY -m benchmarks.e2e_gpu "${DEV[@]}" "${E2E[@]}" "${TABLE4[@]}" --archs orthros,transformer \
    --fused on "${FA2_FLAGS[@]}" "${CHOICE_ARG[@]}" "${RATES[@]}" --out-dir "$OUT" --append \
    --budget-s "$(budget 600 45)"
fi
if [[ "$PART" == hybrids || "$PART" == all ]]; then
  rates
  step e2e_hybrids 600 0 60 $PY -m benchmarks.e2e_gpu "${DEV[@]}" "${E2E[@]}" "${HYB[@]}" \
    --archs orthros_h,linear_hybrid --fused off "${FA2_FLAGS[@]}" "${CHOICE_ARG[@]}" "${RATES[@]}" \
    --out-dir "$OUT" --append --budget-s "$(budget 600 5)"
fi

if [[ "$PART" == load || "$PART" == all ]]; then
  committed_rates
  step decode_load 600 5 60 $PY -m benchmarks.decode_load "${DEV[@]}" "${DL[@]}" "${RATES[@]}" --out-dir "$OUT" \
    --budget-s "$(budget 600 5)"
fi

echo "== done in ${SECONDS}s; CSVs in $OUT:"
ls -la "$OUT"
cat "$STEPS"
$PY -m benchmarks.targets "$OUT" || true
