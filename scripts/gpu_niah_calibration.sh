#!/usr/bin/env bash
# Retrieval recipe calibration on the lent H200, one device call (<= 10 min), run ON THE GPU MACHINE from the repository
# root: builds the gpu profile's data (scripts/gpu_run.sh TARGETS=tokenizer), then trains the VARIANTS below (NIAH or
# MQAR runs, each the profile's recipe with some options changed) side by side on the one GPU while, with
# WITH_RECALL=1 (the default), the niah part of the DAG (scripts/gpu_run.sh PART=niah: NIAH of every arch with the
# profile's recipe, then its finish step) runs beside them.
# Archives for the trip back: $OUT/niah_calibration.tar.gz (results/gpu/calibration/{niah,mqar}/*.csv and the
# variants' logs with their loss curves) and, with WITH_RECALL=1, $OUT/gpu_results.tar.gz; scripts/gpu_unpack.sh
# unpacks either. Why: a control whose recipe has not been shown to pass (results/gpu/calibration/README.md); each
# variant changes one knob or seed of the profile's recipe, so one call both runs the study and says what mattered.
# Usage (run tool, carry [".whl_xz"]): SUITE_COMMIT=<sha> OUT=$OUT bash scripts/gpu_niah_calibration.sh
# Env: TOTAL_S (570) caps the command; DATA_S (240) caps the data step; WITH_RECALL (1); RECALL_JOBS (6); OUT;
# RECALL_TARGETS (e.g. results/gpu/niah.csv) runs those DAG targets instead of the niah part, RECALL_FORCE (e.g.
# niah) re-runs those rules even where their outputs exist. CAL_VARIANTS: the variants, "name|study|arch|options;..."
# (study niah or mqar; options are added to the profile's recipe, e.g. "steps2400|niah|transformer|--steps 2400";
# default: the NIAH controls at the profile's recipe, below); CAL_SEEDS (42): every variant at each of these seeds,
# into $CAL/<study>/<arch>_<name>_seed<seed>.csv; CAL_DRY=1: print the variants' commands and stop (no data, no GPU).
set -uo pipefail
cd "$(dirname "$0")/.."
TOTAL_S=${TOTAL_S:-570}
WITH_RECALL=${WITH_RECALL:-1}
CAL_DRY=${CAL_DRY:-0}
for flag in CAL_DRY WITH_RECALL; do
  [[ ${!flag} =~ ^[01]$ ]] || { echo "$flag must be 0 or 1, got '${!flag}'" >&2; exit 2; }
done
# name|study|arch|extra arguments. The default: the NIAH controls at the profile's recipe, unchanged (the positive
# control's Transformer and the negative control's SWA, with Orthros, within the training length; the MQAR control's
# seeds and schedules have their own script, scripts/gpu_mqar_control.py)
IFS=';' read -r -a VARIANTS <<< "${CAL_VARIANTS:-profile|niah|transformer|;profile|niah|swa|;profile|niah|orthros|}"
IFS=',' read -r -a SEEDS <<< "${CAL_SEEDS:-42}"
(( ${#VARIANTS[@]} && ${#SEEDS[@]} )) || { echo "CAL_VARIANTS and CAL_SEEDS must not be empty" >&2; exit 2; }
names=()
archs=()
for v in "${VARIANTS[@]}"; do
  IFS='|' read -r name study arch extra <<< "$v"
  if [[ $(tr -cd '|' <<< "$v") != '|||' || ! $name =~ ^[A-Za-z0-9_.-]+$ || ! $study =~ ^(niah|mqar)$ \
        || ! $arch =~ ^[a-z_]+$ ]]; then
    echo "CAL_VARIANTS: '$v' is not name|study|arch|options (a name of letters, digits, _ . -; study niah or mqar)" >&2
    exit 2
  fi
  names+=("$study/${arch}_$name")
  archs+=("$arch")
done
dup=$(printf '%s\n' "${names[@]}" | sort | uniq -d | head -n 1)
[[ -z $dup ]] || { echo "CAL_VARIANTS: two variants write $dup" >&2; exit 2; }
for seed in "${SEEDS[@]}"; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "CAL_SEEDS: '$seed' is not a whole number (e.g. 42,43,44)" >&2; exit 2; }
done
[[ $(printf '%s\n' "${SEEDS[@]}" | sort | uniq -d) == "" ]] || { echo "CAL_SEEDS: a seed is repeated" >&2; exit 2; }
OUT=${OUT:-work_dirs/gpu/out}
CAL=results/gpu/calibration
LOGS=work_dirs/gpu/logs/calibration
mkdir -p "$OUT" "$CAL/niah" "$CAL/mqar" "$LOGS"
OUT=$(cd "$OUT" && pwd)

# The profile's recipes (profiles/gpu.yaml niah / mqar) as command-line options, read from the config as the DAG's
# niah and mqar rules do; a variant adds or overrides options (argparse keeps the last of a repeated option).
recipe() {  # after the data step: the config validator (jsonschema) comes with the wheels
  PYTHONPATH="/tmp/site:$PWD" "${PYTHON:-python3}" - "$1" <<'PY'
import sys
from suite.config import curriculum_arg, load_config, mqar_cli_args, mqar_control_size
c = load_config("gpu")[sys.argv[1]]
j = lambda v: ",".join(map(str, v))  # noqa: E731
if sys.argv[1] == "niah":
    phases = curriculum_arg(c.get("curriculum", []))
    args = ["--size", c["size"], "--config", "gpu", "--format", c["format"],
            "--train-len", c["train_len"], "--steps", c["steps"], "--batch-size", c["batch_size"], "--lr", c["lr"],
            "--queries", c.get("queries", 3), "--replay", c.get("replay", 0.0), "--depths", j(c["depths"]),
            "--lengths", j(n for n in c["lengths"] if n <= c["train_len"]), "--trials", c["trials"]]
    args += ["--rope-theta", c["rope_theta"]] if "rope_theta" in c else []
    args += ["--schedule", c["schedule"]] if "schedule" in c else []
    args += ["--lm-weight", c["lm_weight"]] if c.get("lm_weight") else []
    args += ["--value-digits", c["value_digits"]] if "value_digits" in c else []
    args += ["--curriculum", phases] if phases else []
else:  # the DAG's mqar rule's options (suite.config.mqar_cli_args) at the size the controls read (a variant's
    # own --size overrides it)
    args = ["--size", mqar_control_size(c), *mqar_cli_args(c)]
print(" ".join(map(str, args)))
PY
}
(( CAL_DRY )) || TOTAL_S=${DATA_S:-240} TARGETS=tokenizer OUT=/tmp/cal_data bash scripts/gpu_run.sh
read -r -a NIAH_BASE <<< "$(recipe niah)"   # variants are evaluated within the training length only
read -r -a MQAR_BASE <<< "$(recipe mqar)"
(( ${#NIAH_BASE[@]} && ${#MQAR_BASE[@]} )) || { echo "could not read the gpu profile's recipes" >&2; exit 2; }
unknown=$(PYTHONPATH="/tmp/site:$PWD" "${PYTHON:-python3}" -c 'import sys
from models.registry import known_archs
print(" ".join(sorted(set(sys.argv[1:]) - set(known_archs()))))' "${archs[@]}" 2>/dev/null | tail -n 1)
[[ -z $unknown ]] || { echo "CAL_VARIANTS: unknown arch(s) $unknown" >&2; exit 2; }
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
left=$(( TOTAL_S - SECONDS - 40 ))
echo "== data ready after ${SECONDS}s; ${#VARIANTS[@]} variants x ${#SEEDS[@]} seeds, ${left}s each at most"
D=work_dirs/gpu/data
for v in "${VARIANTS[@]}"; do
  IFS='|' read -r name study arch extra <<< "$v"
  if [[ $study == niah ]]; then
    args=(suite.eval.niah --arch "$arch" "${NIAH_BASE[@]}" --data-dir "$D" --haystack "$D/test.txt" --no-progress)
  else
    args=(suite.eval.mqar --arch "$arch" "${MQAR_BASE[@]}")
  fi
  for seed in "${SEEDS[@]}"; do
    # shellcheck disable=SC2206  # extra holds several arguments
    cmd=(python3 -m "${args[@]}" --seed "$seed" $extra --device cuda --dtype bfloat16 --profile gpu
         --out "$CAL/$study/${arch}_${name}_seed$seed.csv")
    if (( CAL_DRY )); then echo "${cmd[*]}"; continue; fi
    OMP_NUM_THREADS=2 timeout -k 5 "$left" "${cmd[@]}" > "$LOGS/${study}_${arch}_${name}_seed$seed.log" 2>&1 &
  done
done
(( CAL_DRY )) && exit 0
if (( WITH_RECALL )) && [[ -n ${RECALL_TARGETS:-} ]]; then  # those targets of the DAG instead of its niah part
  TOTAL_S=$(( TOTAL_S - SECONDS - 15 )) TARGETS=$RECALL_TARGETS FORCE=${RECALL_FORCE:-} GPU_JOBS=${RECALL_JOBS:-6} \
    RECALL_THREADS=2 OUT=$OUT bash scripts/gpu_run.sh
elif (( WITH_RECALL )); then
  TOTAL_S=$(( TOTAL_S - SECONDS - 15 )) PART=niah RECALL_JOBS=${RECALL_JOBS:-6} RECALL_THREADS=2 OUT=$OUT \
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
