#!/usr/bin/env bash
# Retrieval recipe calibration on the lent H200, one device call (<= 10 min), run ON THE GPU MACHINE from the repository
# root: builds the gpu profile's data (scripts/gpu_run.sh TARGETS=tokenizer), then trains the VARIANTS below side by
# side on the one GPU while, with WITH_RECALL=1 (the default), the recall part of the DAG (scripts/gpu_run.sh
# PART=recall: NIAH and MQAR of every arch with the profile's recipe, then controls.csv) runs beside them.
# Archives for the trip back: $OUT/niah_calibration.tar.gz (results/gpu/calibration/{niah,mqar}/*.csv and the
# variants' logs with their loss curves) and, with WITH_RECALL=1, $OUT/gpu_results.tar.gz; scripts/gpu_unpack.sh
# unpacks either. Why: no NIAH recipe had passed the positive control on the H200 (results/gpu/calibration/README.md);
# each variant changes one knob of the profile's recipe, so one call both runs the study and says which knob mattered.
# Usage (run tool, carry [".whl_xz"]): SUITE_COMMIT=<sha> OUT=$OUT bash scripts/gpu_niah_calibration.sh
# Env: TOTAL_S (570) caps the command; DATA_S (240) caps the data step; WITH_RECALL (1); RECALL_JOBS (6); OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL_S=${TOTAL_S:-570}
WITH_RECALL=${WITH_RECALL:-1}
OUT=${OUT:-work_dirs/gpu/out}
CAL=results/gpu/calibration
LOGS=work_dirs/gpu/logs/calibration
mkdir -p "$OUT" "$CAL/niah" "$CAL/mqar" "$LOGS"
OUT=$(cd "$OUT" && pwd)

# The profile's recipes (profiles/gpu.yaml niah / mqar), written out once here; a variant adds or overrides options
# (argparse keeps the last of a repeated option).
NIAH_BASE=(--size 3.7M --config gpu --format code --value-digits 2 --train-len 32768 --steps 1500 --batch-size 6
           --lr 2e-3 --queries 3 --replay 0.2 --rope-theta 1000000
           --curriculum 48:0.2:512,512:0.15:64,4096:0.15:8,16384:0.2:4
           --lengths 4096,16384,32768 --depths 0,0.25,0.5,0.75,1 --trials 4)
MQAR_BASE=(--size 3.7M --seq-len 128 --kv-pairs 4,8,16,32 --train-kv 8 --window 16 --vocab-size 512 --steps 2000
           --batch-size 256 --lr 1e-3 --weight-decay 0 --num-test 1000)
# name|study|arch|extra arguments
VARIANTS=(
  "rows8|niah|transformer|--batch-size 8 --curriculum 48:0.2:512,512:0.15:64,4096:0.15:8,16384:0.2:8"
)

TOTAL_S=${DATA_S:-240} TARGETS=tokenizer OUT=/tmp/cal_data bash scripts/gpu_run.sh
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
left=$(( TOTAL_S - SECONDS - 40 ))
echo "== data ready after ${SECONDS}s; ${#VARIANTS[@]} variants, ${left}s each at most"
D=work_dirs/gpu/data
for v in "${VARIANTS[@]}"; do
  IFS='|' read -r name study arch extra <<< "$v"
  if [[ $study == niah ]]; then
    args=(suite.eval.niah --arch "$arch" "${NIAH_BASE[@]}" --data-dir "$D" --haystack "$D/test.txt" --no-progress)
  else
    args=(suite.eval.mqar --arch "$arch" "${MQAR_BASE[@]}")
  fi
  # shellcheck disable=SC2086  # extra holds several arguments
  OMP_NUM_THREADS=2 timeout -k 5 "$left" python3 -m "${args[@]}" $extra --seed 42 --device cuda --dtype bfloat16 \
    --profile gpu --out "$CAL/$study/${arch}_$name.csv" > "$LOGS/${study}_${arch}_$name.log" 2>&1 &
done
if (( WITH_RECALL )); then
  TOTAL_S=$(( TOTAL_S - SECONDS - 15 )) PART=recall RECALL_JOBS=${RECALL_JOBS:-6} RECALL_THREADS=2 OUT=$OUT \
    bash scripts/gpu_run.sh
fi
wait
echo "== variants done after ${SECONDS}s"
for f in "$CAL"/niah/*.csv "$CAL"/mqar/*.csv; do
  [[ -f $f && $f -nt /tmp/cal_data ]] || continue
  python3 -c "
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
key = 'context_len' if 'context_len' in rows[0] else 'num_kv_pairs'
acc = collections.defaultdict(list)
for r in rows: acc[r[key]].append(float(r['accuracy'] or 'nan'))
print(sys.argv[1], 'loss', rows[0].get('train_loss'), 'train_s', rows[0].get('train_s'),
      {k: round(sum(v) / len(v), 3) for k, v in acc.items()})" "$f"
done | tee "$LOGS/summary.txt"
mkdir -p gpu_run && cp work_dirs/gpu/run/* gpu_run/ 2>/dev/null  # gpu_run.sh's own logs of the last step
tar -czf "$OUT/niah_calibration.tar.gz" "$CAL" "$LOGS" gpu_run
