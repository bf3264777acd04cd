#!/usr/bin/env bash
# The gpu profile's DAG on a GPU host without internet access whose commands are limited in time. Run it from the
# repository root on the host as often as needed: each run goes on where the last one stopped (the host keeps its
# checkout, work_dirs/ included) and packs what it wrote into one archive for copying back.
#   1. the wheels built elsewhere (.whl.tar, tools/offline_gpu/wheels.py) into /tmp/site once, then checked
#   2. study: training, lm-eval, conversion, NIAH and MQAR, GPU_JOBS jobs at once on the GPU
#   3. prefill_cpu: the CPU prefill sweeps, alone on the machine (they time the CPU)
#   4. final: controls.csv and the profile's tables and figures (results/gpu/report)
# A step starts only with enough time left; one cut by the cap goes on at the next run (a training resumes from its
# last checkpoint). TARGETS="a b" runs these snakemake targets (files or rules) instead of 2-4, e.g.
# TARGETS=benchmarks for the system benchmarks, TARGETS=results/gpu/perf/main for the time-capped ones (with
# GPU_JOBS=1: timings alone on the GPU); FORCE="rule ..." re-runs those rules among them. KEEP=1 (with TARGETS),
# on a host that starts bare: the outputs of the targets' jobs that came with the tree (earlier parts' committed
# results, unpacked data) count as done; it touches them (mtimes and .snakemake metadata, never their content), also
# under DRY=1, so that a dry run shows what the part would run. Each snakemake call's jobs
# see SUITE_DEADLINE (seconds since the epoch) by which they must be done, so that one that caps itself
# (benchmarks/perf_all.sh) ends inside the cap.
# At exit, whatever happened: $OUT/gpu_results.tar.gz with the results/gpu files this run wrote (among them
# job_times/<UTC>.csv: each job's seconds from snakemake's records, suite.report.job_times), the list of those it
# deleted and the tail of every log; tools/offline_gpu/unpack.sh puts them into the checkout here.
# Env: TIME_CAP (seconds the command may take, packing included; 0: no cap), PACK_S (30, kept for packing),
#   GPU_JOBS (8), OUT (work_dirs/gpu/out), SMK_ARGS (more snakemake options, e.g. "--set-threads train=2"),
#   SUITE_COMMIT (recorded in every row where the host's copy has no .git), PYTHON (python3),
#   DRY=1 (`snakemake -n` of each step and no wheels: a test on any machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
TIME_CAP=${TIME_CAP:-0} PACK_S=${PACK_S:-30} GPU_JOBS=${GPU_JOBS:-8} DRY=${DRY:-0}
OUT=${OUT:-work_dirs/gpu/out} PY=${PYTHON:-python3} TARGETS=${TARGETS:-} FORCE=${FORCE:-} KEEP=${KEEP:-0}
read -r -a targets <<< "$TARGETS"
TARGETS="${targets[*]}"  # blank when only whitespace: then snakemake would run its default target
[[ $TIME_CAP =~ ^[0-9]+$ ]] || { echo "TIME_CAP must be a whole number of seconds, got '$TIME_CAP'" >&2; exit 2; }
[[ $DRY =~ ^[01]$ ]] || { echo "DRY must be 0 or 1, got '$DRY'" >&2; exit 2; }
for var in PACK_S GPU_JOBS; do
  [[ ${!var} =~ ^[1-9][0-9]*$ ]] || { echo "$var must be a whole number >= 1, got '${!var}'" >&2; exit 2; }
done
[[ -n $FORCE && -z $TARGETS ]] && { echo "FORCE ('$FORCE') re-runs rules among TARGETS: set TARGETS too" >&2; exit 2; }
[[ $KEEP =~ ^[01]$ ]] || { echo "KEEP must be 0 or 1, got '$KEEP'" >&2; exit 2; }
(( KEEP )) && [[ -z $TARGETS ]] && { echo "KEEP=1 keeps earlier results among TARGETS: set TARGETS too" >&2; exit 2; }
RES=results/gpu LOGS=work_dirs/gpu/logs RUN=work_dirs/gpu/run
mkdir -p "$OUT" "$RUN" "$LOGS" "$RES"
OUT=$(cd "$OUT" && pwd)
rm -f "$RUN"/*
touch "$RUN/.started"
find "$RES" -type f | sort > "$RUN/results_at_start.txt"
exec > >(tee -a "$RUN/run.log") 2>&1

left() { if (( TIME_CAP )); then echo $(( TIME_CAP - PACK_S - SECONDS )); else echo 9999999; fi; }
pack() {  # the results/gpu files this run wrote (and deleted: a job cut after snakemake removed its old output)
  local rc=$? stage f
  set +e
  comm -23 "$RUN/results_at_start.txt" <(find "$RES" -type f | sort) > "$RUN/results_removed.txt"
  echo "exit status $rc after ${SECONDS}s" > "$RUN/status.txt"
  if (( ! DRY )) && [[ -d .snakemake/metadata ]]; then  # what each job of this call took, from snakemake's records
    "$PY" -m suite.report.job_times record --since "$(stat -c %.9Y "$RUN/.started")" --call-s "$SECONDS" \
      --gpu-jobs "$GPU_JOBS" \
      --device "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)" \
      --commit "${SUITE_COMMIT:-}" --out "$RES/job_times/$(date -u +%Y%m%dT%H%M%SZ).csv" > "$RUN/job_times.log" 2>&1 \
      || echo "== the jobs' times were not recorded: see $RUN/job_times.log"
  fi
  stage=$(mktemp -d)
  find "$RES" -type f -newer "$RUN/.started" -print0 | xargs -0 -r cp -a --parents -t "$stage"
  mkdir -p "$stage/logs/run"
  for f in "$LOGS"/*.log; do [[ -f $f ]] && tail -c 1000000 "$f" > "$stage/logs/${f##*/}"; done
  for f in "$RUN"/*; do tail -c 1000000 "$f" > "$stage/logs/run/${f##*/}"; done
  tar -czf "$OUT/gpu_results.tar.gz.part" -C "$stage" . && mv "$OUT/gpu_results.tar.gz.part" "$OUT/gpu_results.tar.gz"
  echo "== packed $(find "$stage/results" -type f 2>/dev/null | wc -l) results and the logs into" \
    "$OUT/gpu_results.tar.gz; exit status $rc after ${SECONDS}s"
  rm -rf "$stage"
  exit "$rc"
}
trap pack EXIT

export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export SUITE_COMMIT=${SUITE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
if (( DRY )); then
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  source tools/offline_gpu/site.sh
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "no nvidia-smi"
    "$PY" tools/offline_gpu/wheels.py check; } > "$RUN/env.log" 2>&1 || echo "== WARNING: see $RUN/env.log"
  head -n 3 "$RUN/env.log"
fi

SMK=("$PY" -m snakemake --cores all --keep-going --rerun-incomplete --resources gpu="$GPU_JOBS" ${SMK_ARGS:-})
(( DRY )) && SMK+=(-n)
FAILED=0
smk() {  # smk NAME MIN_S [snakemake options] -- TARGETS...: one snakemake call under what is left of the cap
  local name=$1 min=$2 cap rc
  shift 2
  cap=$(left)
  (( DRY && cap < 60 )) && cap=60  # a dry run plans every step
  if (( ! DRY && cap < min )); then
    echo "== $name: ${cap}s left, it needs ${min}s: run this command again"
    FAILED=1
    return 1
  fi
  echo "== $name: snakemake $*"
  (( TIME_CAP )) && export SUITE_DEADLINE=$(( $(date +%s) + cap - 20 ))  # 20 s for snakemake to close the job
  timeout -k 10 "$cap" "${SMK[@]}" --config profile=gpu "$@" > "$RUN/$name.log" 2>&1
  rc=$?
  grep -E "steps \([0-9]+%\) done|Nothing to be done|^Error in rule|Exception|MissingInput" "$RUN/$name.log" | tail -n 5
  (( rc == 124 || rc == 137 )) && echo "== $name: stopped at the time cap: run this command again, it goes on"
  (( rc )) && FAILED=1
  return "$rc"
}

if [[ -n $TARGETS ]]; then
  read -r -a force <<< "$FORCE"
  if (( KEEP )); then
    # Files the tree brought (earlier parts' results, data unpacked from shards) have no snakemake metadata on a bare
    # host, so snakemake judges them by mtime against the code copied with them, whatever --rerun-triggers says, and
    # would run them again. --touch marks those among the targets' jobs that exist as done; a missing one stays to run.
    "$PY" -m snakemake --cores all --touch ${SMK_ARGS:-} --config profile=gpu \
      -- "${targets[@]}" > "$RUN/keep.log" 2>&1 \
      || echo "== WARNING: snakemake --touch failed (see $RUN/keep.log): earlier results may run again"
    jobs=$(grep -c '^\(local\)\?rule ' "$RUN/keep.log")
    todo=$(grep -c "not touched because they don't exist" "$RUN/keep.log")
    echo "== keep: $((jobs - todo)) of the targets' $jobs jobs were done already"
    touch "$RUN/.started"  # only what this run writes goes back, and only the jobs it ran count in its job times
  fi
  smk targets 30 ${force[@]:+--forcerun "${force[@]}"} -- "${targets[@]}"
else
  smk study 60 -- "$RES/quality.csv" "$RES/ablation.csv" "$RES/conversion.csv" "$RES/niah.csv" "$RES/mqar.csv" \
    && smk prefill_cpu 150 -- "$RES/prefill_cpu.csv" "$RES/prefill_128k.csv" \
    && smk final 30 -- "$RES/controls.csv" render
fi
exit "$FAILED"
