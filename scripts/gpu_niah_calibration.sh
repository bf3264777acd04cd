#!/usr/bin/env bash
# NIAH recipe calibration on the lent H200, one device call (<= 10 min), run ON THE GPU MACHINE from the repository
# root: builds the gpu profile's data (scripts/gpu_run.sh TARGETS=tokenizer), then trains the VARIANTS below side by
# side on the one GPU (suite.eval.niah: train to 32K, evaluate within the training length) and packs
# results/gpu/calibration/niah/*.csv and the logs (loss curves) into $OUT/niah_calibration.tar.gz, which
# scripts/gpu_unpack.sh unpacks here. Why: no NIAH recipe has yet passed the positive control on the H200
# (results/gpu/calibration/README.md); edit VARIANTS (one knob each) before a call.
# Usage (run tool, carry [".whl_xz"]): SUITE_COMMIT=<sha> OUT=$OUT bash scripts/gpu_niah_calibration.sh
# Env: TOTAL_S (560) caps the command; DATA_S (240) caps the data step; STEPS (1000) per variant; SIZE (3.7M); OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL_S=${TOTAL_S:-560}
STEPS=${STEPS:-1000}
OUT=${OUT:-work_dirs/gpu/out}
CAL=results/gpu/calibration/niah
LOGS=work_dirs/gpu/logs/calibration
mkdir -p "$OUT" "$CAL" "$LOGS"
OUT=$(cd "$OUT" && pwd)

# name|arch|extra arguments. Common: $SIZE, train_len 32768 (batch 2 of 32 needles), lr 2e-3, curriculum
# 48 tokens x 128 rows (3 needles) -> 512 x 32 (8) -> 4096 x 8 (16), 15/15/20% of the steps.
VARIANTS=(
  "dense|transformer|"
  "dense_theta1m|transformer|--rope-theta 1000000"
  "dense_lm|transformer|--lm-weight 1"
  "dense_theta1m_lm|transformer|--rope-theta 1000000 --lm-weight 1"
  "dense_theta1m_lm|orthros|--rope-theta 1000000 --lm-weight 1"
)

TOTAL_S=${DATA_S:-240} TARGETS=tokenizer OUT=/tmp/cal_data bash scripts/gpu_run.sh
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
left=$(( TOTAL_S - SECONDS - 30 ))
echo "== data ready after ${SECONDS}s; ${#VARIANTS[@]} variants, ${left}s each at most"
D=work_dirs/gpu/data
for v in "${VARIANTS[@]}"; do
  IFS='|' read -r name arch extra <<< "$v"
  # shellcheck disable=SC2086  # extra holds several arguments
  timeout -k 5 "$left" python3 -m suite.eval.niah --arch "$arch" --size "${SIZE:-3.7M}" --config gpu --data-dir "$D" \
    --haystack "$D/test.txt" --format code --value-digits 2 --train-len 32768 --steps "$STEPS" --batch-size 2 \
    --lr 2e-3 --queries 32 --curriculum 48:0.15:128:3,512:0.15:32:8,4096:0.2:8:16 \
    --lengths 4096,16384,32768 --depths 0,0.25,0.5,0.75,1 --trials 4 --seed 42 --device cuda --dtype bfloat16 \
    --profile gpu --no-progress $extra --out "$CAL/${arch}_$name.csv" > "$LOGS/${arch}_$name.log" 2>&1 &
done
wait
echo "== variants done after ${SECONDS}s"
for f in "$CAL"/*.csv; do
  python3 -c "
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
acc = collections.defaultdict(list)
for r in rows: acc[r['context_len']].append(float(r['accuracy'] or 'nan'))
print(sys.argv[1], 'loss', rows[0]['train_loss'], 'train_s', rows[0]['train_s'],
      {k: round(sum(v) / len(v), 3) for k, v in acc.items()})" "$f"
done | tee "$LOGS/summary.txt"
mkdir -p gpu_run && cp work_dirs/gpu/run/* gpu_run/ 2>/dev/null  # the data step's own logs
tar -czf "$OUT/niah_calibration.tar.gz" "$CAL" "$LOGS" gpu_run
