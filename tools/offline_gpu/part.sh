#!/usr/bin/env bash
# One part of Table 2's pretrained arms (the gpu profile) on a time-capped GPU host that lacks snakemake: the DAG's own
# commands for these jobs (tests/test_offline_gpu.py compares them with `snakemake -n -p`), each under a timeout so a
# part stops before the host's cap; a training cut short resumes from its last checkpoint at the next call.
#
#   part.sh setup                                 install .whl/ into /tmp/site, check the imports, unpack the benchmarks
#   part.sh prep                                  unpack the model and English shards; make Base, random init, converted
#   part.sh train ARM SEED [SECS]                 continued training of base_cpt or conversion
#   part.sh score VARIANT SEED TASKS NAME [SECS]  lm-eval on every document (NAME: quality for commonsense,squad,drop;
#                                                 mmlu for mmlu), each document's outcome beside the rows
#   part.sh ppl VARIANT SEED                      held-out loss by position bucket
#   part.sh niah VARIANT SEED                     NIAH within the model's context (RULER's needle, held-out text)
#
# Every step leaves $OUT/part.tar.gz (default work_dirs/gpu/out/) for tools/offline_gpu/unpack.sh: the rows written so
# far, the training rows under results/gpu/pretrained/train/ (the run keeps them in work_dirs/, which a fresh copy of
# the tree does not overwrite), and the logs. DRY=1 prints each job's command instead of running it. SUITE_COMMIT
# names the commit the rows record.
set -uo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-work_dirs/gpu/out}
export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export USE_HUB_KERNELS=0 PYTHONUNBUFFERED=1 SUITE_COMMIT=${SUITE_COMMIT:?set SUITE_COMMIT to the commit of this tree}
W=work_dirs/gpu
R=results/gpu/pretrained
L=$W/logs
mkdir -p "$L" "$OUT"
T0=$SECONDS

job() {  # job LOG SECS CMD...: CMD under a timeout, its output in LOG; DRY=1 prints CMD
  local log=$1 secs=$2
  shift 2
  if [ -n "${DRY:-}" ]; then echo "$*"; return 0; fi
  timeout "$secs" "$@" > "$log" 2>&1
  local rc=$?
  echo "$(basename "$log" .log): rc=$rc after $((SECONDS - T0)) s"
  grep -v '^Running\|it/s\]' "$log" | tail -4
  return $rc
}

pack() {
  [ -n "${DRY:-}" ] && return
  local trained=()
  for d in $W/pretrained/*/seed*; do [ -f "$d/metrics.csv" ] || [ -f "$d/loss.csv" ] && trained+=("$d"); done
  tar -czf "$OUT/part.tar.gz" --ignore-failed-read --exclude=checkpoint --exclude=run_config.json \
    --transform "s,^$W/pretrained/,$R/train/," --transform "s,^$L,logs," $R/eval "${trained[@]}" $L 2>/dev/null
  echo "[$step: $((SECONDS - T0)) s; packed $OUT/part.tar.gz]"
}

checkpoint() {  # the model folder a variant is scored from
  case $1 in
    base | random_init | converted) echo $W/models/$1 ;;
    *) echo $W/pretrained/$1/seed$2/checkpoint ;;
  esac
}

step=${1:?usage: part.sh setup|prep|train|score|ppl|niah ...}
shift
case $step in
setup)
  job $L/setup_wheels.log 300 $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
  job $L/setup_imports.log 120 $PYTHON -c "import jsonschema, datasets, lm_eval, transformers, torch, fla, gguf" || exit 4
  mkdir -p $W/data
  job $L/setup_benchmarks.log 120 tar -xJf $W/data/archives/benchmarks.tar.xz -C $W/data || exit 5
  ;;
prep)
  job $L/unpack_model.log 300 $PYTHON -m suite.data.shards unpack $W/data/archives/model-shards $W/models/archives || exit 6
  job $L/unpack_english.log 300 $PYTHON -m suite.data.shards unpack $W/data/archives/english-shards $W/data/english \
    || exit 7
  job $L/base_model.log 300 $PYTHON -m suite.train.base_model --config gpu --out $W/models/base \
    --random-init $W/models/random_init || exit 8
  job $L/convert_base.log 300 $PYTHON -m suite.train.convert_base --base $W/models/base --window 128 \
    --out $W/models/converted || exit 9
  ;;
train)
  arm=$1 seed=$2 secs=${3:-590}
  start=converted
  [ "$arm" = base_cpt ] && start=base
  job $L/pretrained_train_${arm}_seed$seed.log "$secs" $PYTHON -m suite.train.run --model $W/models/$start \
    --arch "$arm" --data-dir $W/data/english --out-dir $W/pretrained/$arm/seed$seed --seed "$seed" --steps 1536 \
    --warmup 77 --lr-from results/gpu/pretrained_lr.csv --eval-points 12 --batch-size 16 --seq-len 2048 \
    --min-lr-ratio 0.1 --weight-decay 0.1 --dtype bfloat16 --order epoch --compile --device cuda --profile gpu \
    --restart-if-changed --no-progress
  ;;
score)
  variant=$1 seed=$2 tasks=$3 name=$4 secs=${5:-590}
  mkdir -p $R/eval/$variant/seed$seed
  job $L/pretrained_benchmarks_${variant}_seed${seed}_$name.log "$secs" $PYTHON -m suite.eval.harness \
    --checkpoint "$(checkpoint "$variant" "$seed")" --tasks "$tasks" --benchmark-data $W/data/benchmarks \
    --num-fewshot 0 --batch-size 64 --dtype float32 --device cuda --arch "$variant" --seed "$seed" --profile gpu \
    --out $R/eval/$variant/seed$seed/$name.csv
  ;;
ppl)
  variant=$1 seed=$2
  mkdir -p $R/eval/$variant/seed$seed
  job $L/pretrained_ppl_${variant}_seed$seed.log 300 $PYTHON -m suite.eval.ppl_buckets \
    --checkpoint "$(checkpoint "$variant" "$seed")" --data-dir $W/data/english --max-len 8192 --docs 8 \
    --variant "$variant" --seed "$seed" --device cuda --profile gpu --out $R/eval/$variant/seed$seed/ppl.csv
  ;;
niah)
  variant=$1 seed=$2
  mkdir -p $R/eval/$variant/seed$seed
  job $L/pretrained_niah_${variant}_seed$seed.log 300 $PYTHON -m suite.experiments.niah.run \
    --checkpoint "$(checkpoint "$variant" "$seed")" --haystack $W/data/english/test.txt --format ruler --train-len 8000 \
    --lengths 1024,2048,4096,8000 --depths 0.1,0.3,0.5,0.7,0.9 --trials 4 --seed "$seed" --device cuda \
    --dtype bfloat16 --label-arch "$variant" --profile gpu --no-progress --out $R/eval/$variant/seed$seed/niah.csv
  ;;
*)
  echo "part.sh: unknown step '$step' (setup, prep, train, score, ppl, niah)" >&2
  exit 2
  ;;
esac
rc=$?
pack
exit $rc
