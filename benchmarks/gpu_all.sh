#!/usr/bin/env bash
# The whole GPU system benchmark (paper Sec. 4.5-4.6) in one command on one H200, about 7 minutes:
#   1. prefill_gpu: kernel rates (-> rates.json), Transformer vs Orthros prefill 8K..128K, one layer x 36 at 256K..1M,
#      8-GPU cost-model rows, pass/fail targets                                   -> results/gpu/prefill.csv
#   2. e2e_gpu: engine check, TTFT / E2E / throughput at 128K/128, 127K/1K, 120K/8K, batch 2 -> results/gpu/e2e.csv
#   3. cost_model: predictions with the measured rates                           -> results/gpu/cost_model.csv
#   4. (time left, FLA importable) linear_hybrid vs orthros_h prefill and E2E, appended to prefill.csv / e2e.csv
# Every step writes its CSV row by row, so a step cut by its time limit keeps what it measured.
# The command of the DAG's rule gpu_benchmarks (workflows/bench.smk; `snakemake --cores all benchmarks --config
# profile=gpu`, on an offline host tools/offline_gpu/run.sh with TARGETS=benchmarks), which passes OUT, WINDOW (the
# study config's `window`, the Orthros window w; unset, each step's default) and TOTAL_S (470 unset: the whole
# command's cap). PART=main runs steps 1-3, PART=hybrids step 4 (GDN kernels JIT-compile for minutes), PART=all
# (default) both.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-results/gpu}
RES=results/gpu
TOTAL_S=${TOTAL_S:-470}
mkdir -p "$OUT" "$RES"

left() { echo $(( TOTAL_S - SECONDS )); }
cap() { local want=$1 l; l=$(left); (( l < want )) && want=$l; (( want < 1 )) && want=1; echo "$want"; }

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
  python3 -c "import triton; print('triton', triton.__version__)" || echo "triton absent"
  python3 -c "import fla; print('fla', fla.__version__)" || echo "fla absent: the window kernel falls back to the blocked path"
  python3 -c "from models import kernels; print('backend', kernels.describe('cuda'))"
} 2>&1 | tee "$OUT/env.log"

PART=${PART:-all}
[[ "$PART" =~ ^(all|main|hybrids)$ ]] || { echo "PART must be all, main or hybrids, got '$PART'" >&2; exit 2; }
RATES=()
WIN=()
[[ -n "${WINDOW:-}" ]] && WIN=(--window "$WINDOW")
[[ -f "$RES/rates.json" ]] && RATES=(--rates "$RES/rates.json")

if [[ "$PART" != hybrids ]]; then
echo "== prefill_gpu ($(left)s left)"
timeout "$(cap 290)" python3 -m benchmarks.prefill_gpu --out-dir "$RES" "${WIN[@]}" --budget-s 200 2>&1 | tee "$OUT/prefill_gpu.log"

echo "== e2e_gpu ($(left)s left)"
[[ -f "$RES/rates.json" ]] && RATES=(--rates "$RES/rates.json")
timeout "$(cap 250)" python3 -m benchmarks.e2e_gpu --out-dir "$RES" "${WIN[@]}" "${RATES[@]}" 2>&1 | tee "$OUT/e2e_gpu.log"

echo "== cost_model ($(left)s left)"
python3 -m suite.cost_model --out "$RES/cost_model.csv" "${WIN[@]}" "${RATES[@]}" 2>&1 | tee "$OUT/cost_model.log"

fi

if [[ "$PART" != main ]] && (( $(left) > 60 )) && python3 -c "import fla" 2>/dev/null; then
  echo "== prefill_gpu hybrids ($(left)s left; GDN kernels JIT-compile on first use)"
  timeout "$(cap 200)" python3 -m benchmarks.prefill_gpu --out-dir "$RES" --append "${WIN[@]}" "${RATES[@]}" \
    --archs linear_hybrid,orthros_h --lengths 8192,32768,131072 --layer-lengths "" --budget-s 60 \
    2>&1 | tee "$OUT/prefill_hybrid.log"
  echo "== e2e_gpu hybrids ($(left)s left)"
  timeout "$(cap 250)" python3 -m benchmarks.e2e_gpu --out-dir "$RES" --append "${WIN[@]}" "${RATES[@]}" \
    --archs linear_hybrid,orthros_h 2>&1 | tee "$OUT/e2e_hybrid.log"
else
  echo "== hybrids skipped ($(left)s left or FLA absent)"
fi

for f in prefill.csv e2e.csv cost_model.csv rates.json; do
  [[ -f "$RES/$f" && "$(realpath "$RES")" != "$(realpath "$OUT")" ]] && cp "$RES/$f" "$OUT/"
done
echo "== done in ${SECONDS}s; CSVs in $RES and $OUT"
