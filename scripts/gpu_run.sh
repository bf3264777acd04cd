#!/usr/bin/env bash
# One part of the gpu profile's DAG, run ON THE LENT GPU MACHINE (offline) from the repository root, then everything
# it produced packed into ONE archive, $OUT/gpu_results.tar.gz, for the trip back (scripts/gpu_unpack.sh; README:
# GPU runs). One device call each, <= 10 minutes:
#   PART=train   training (6 archs at 12M and the SO ablation at 3M/6M/12M, 3 seeds each), the conversion
#                experiment, lm-eval of every run                                     -> quality/ablation/conversion.csv
#   PART=niah    NIAH: a 3.7M model per arch trained to 32K, tested to 128K                           -> niah.csv
#   PART=mqar    MQAR on Zoology's grid (6 archs x d_model 64/128/256), MQAR_JOBS models at once, a batch started
#                only with MQAR_BATCH_S left: two calls (run it again and it goes on), then       -> mqar.csv
#   PART=finish  the CPU prefill sweeps (timing, random weights, alone on the machine) where missing, then
#                controls.csv and the paper tables and figures (render_dir results/gpu/report) once every CSV they
#                read is in results/gpu. Every part above ends with it too (the prefill sweeps where 150 s are left),
#                so the last part run completes the DAG when it has time left; otherwise run PART=finish.
#   PART=bench   the opt-in system benchmarks (not in `all`; the `benchmarks` target), one at a time on an otherwise
#                idle machine: suite/bench/gpu_all.sh (PART=main of it: prefill, E2E, cost model; it overwrites the
#                merged prefill/e2e/cost_model CSVs), then the FLA cross-check (300 s left; after gpu_all.sh's ~7
#                minutes there are not: run it with FORCE=fla_crosscheck TARGETS=... below), on >= 2 GPUs
#                seq_parallel.csv, each step forced
#   PART=none    nothing of the DAG: only what PROBE / MQAR_CONTROL below ask for (a calibration call)
#   TARGETS="t1 t2 ..." (instead of PART): these snakemake targets (files or rule names); FORCE="rule ..." re-runs
#                those rules even where their outputs exist
#                (e.g. FORCE=fla_crosscheck TARGETS=results/gpu/fla_crosscheck.csv)
# Results of earlier calls in results/gpu are kept: the part goes on where the last call stopped (a job that reads a
# checkpoint re-runs the training it needs, since checkpoints do not come back, unless the machine was kept warm since
# that training; scripts/gpu_plan.py).
# Wheels (scripts/gpu_wheels.sh, here): .whl_xz/wheels.tar.xz (all of them, one solid xz) if carried, else .whl/*.whl
# and .whl_tilelang/*.whl, installed into /tmp/site.
# Env: TOTAL_S (560) caps the whole command, installing and packing included (PACK_S 25 s kept for packing, KILL_S
#   10 s between a step's TERM and KILL); GPU_JOBS (8): GPU jobs of the train part at once (--resources gpu=N;
#   every GPU rule declares gpu=1), all on the first GPU (small models; snakemake does not spread jobs over GPUs; 1 =
#   one GPU job at a time, as a plain `snakemake --resources gpu=1`, in more calls), TRAIN_THREADS (2) threads each
#   for the scheduler (--set-threads: the profile's 4 a job would let only 16 / 4 of them run; the processes keep
#   the profile's 4 torch threads); RECALL_JOBS (8): the same for
#   the niah part, RECALL_THREADS (2) threads each (also TARGETS' NIAH and MQAR jobs, which share GPU_JOBS);
#   MQAR_JOBS (9, one thread each) and MQAR_BATCH_S (420): the mqar part's batches; GPU_ALL_PART (main): gpu_all.sh's own
#   PART in PART=bench; CROSSCHECK_MIN_S (300): the FLA cross-check starts only with that much left; SUITE_COMMIT
#   (provenance: the copy on the device has no .git); MPS (1 for the train, niah and mqar parts, else 0): the MPS
#   daemon, section 2; PROBE=1: scripts/gpu_concurrency_probe.py first (~2 min: rounds of 9 and 18 short MQAR
#   trainings at once, with and without MPS, into gpu_run/concurrency_probe.csv; skipped with < 300 s left);
#   MQAR_CONTROL=1: scripts/gpu_mqar_control.py first (MPS on): the MQAR positive control's first phase, the
#   variants MQAR_CONTROL_VARIANTS (profile=: the recipe; "name=--opt v;...") at the seeds MQAR_CONTROL_SEEDS
#   (42-47), all at once, into gpu_run/mqar_control.csv and gpu_run/mqar_control_*.log;
#   OUT (default work_dirs/gpu/out); DRY=1: `snakemake -n` of every
#   step instead (CPU smoke test: no wheels, no GPU; PYTHON picks the interpreter, NGPU the GPU count); AGE (1 unless
#   DRY): set file times so that results of earlier calls count as up to date; DATA_PREP=1 (with TARGETS): corpus and
#   tokenizer first (targets that read them, e.g. controls.csv); JIT_DIR (/tmp/jit) and JIT_BACK (1):
#   the JIT caches below.
# JIT caches: FLA's Triton kernels (with their autotuning results) and TileLang's compile on first use, which costs a
# GDN run ~160 s before its first step and ~45 s at each new sequence length. TRITON_CACHE_DIR and TILELANG_CACHE_DIR
# point into JIT_DIR; .jit_cache/jit_cache.tar.xz, when carried, is unpacked there first, and with JIT_BACK=1 this
# call's caches come back as $OUT/jit_cache.tar.xz (a second file beside the results archive, left out when over
# 16 MiB). scripts/gpu_unpack.sh moves it to .jit_cache/ (git-ignored) for the next call to carry.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WHAT=${PART:-}
unset PART  # suite/bench/gpu_all.sh reads its own PART from the environment
if [[ -n "${TARGETS:-}" && -n "$WHAT" ]]; then
  echo "set PART or TARGETS, not both (PART='$WHAT', TARGETS='$TARGETS')" >&2
  exit 2
elif [[ -n "${FORCE:-}" && -z "${TARGETS:-}" ]]; then
  echo "FORCE ('$FORCE') re-runs rules among TARGETS only; set TARGETS too (e.g. FORCE=render TARGETS=render)" >&2
  exit 2
elif [[ -n "${TARGETS:-}" ]]; then
  WHAT=targets
elif [[ ! "$WHAT" =~ ^(train|niah|mqar|finish|bench|none)$ ]]; then
  echo "PART must be train, niah, mqar, finish, bench or none (or set TARGETS), got '$WHAT' (the old recall part is" \
    "now niah and mqar)" >&2
  exit 2
fi
DRY=${DRY:-0}
DATA_PREP=${DATA_PREP:-0}
PROBE=${PROBE:-0}
MQAR_CONTROL=${MQAR_CONTROL:-0}
MPS=${MPS:-$([[ $WHAT =~ ^(train|niah|mqar)$ || $MQAR_CONTROL == 1 ]] && echo 1 || echo 0)}  # (section 2)
for flag in DRY DATA_PREP PROBE MQAR_CONTROL MPS; do
  if [[ ! ${!flag} =~ ^[01]$ ]]; then echo "$flag must be 0 or 1, got '${!flag}'" >&2; exit 2; fi
done
TOTAL_S=${TOTAL_S:-560}
PACK_S=${PACK_S:-25}
KILL_S=${KILL_S:-10}           # a step past its cap gets TERM, then KILL this much later (its whole process group)
GPU_JOBS=${GPU_JOBS:-8}
TRAIN_THREADS=${TRAIN_THREADS:-2}
RECALL_JOBS=${RECALL_JOBS:-8}
RECALL_THREADS=${RECALL_THREADS:-2}
MQAR_JOBS=${MQAR_JOBS:-9}
MQAR_BATCH_S=${MQAR_BATCH_S:-420}
for var in TOTAL_S PACK_S KILL_S GPU_JOBS TRAIN_THREADS RECALL_JOBS RECALL_THREADS MQAR_JOBS MQAR_BATCH_S; do
  if [[ ! ${!var} =~ ^[1-9][0-9]*$ ]]; then echo "$var must be a whole number >= 1, got '${!var}'" >&2; exit 2; fi
done
if (( TOTAL_S > 590 && ! DRY )); then
  echo "== WARNING: TOTAL_S=$TOTAL_S: a lent machine ends a command at 600 s, before this one would pack its results"
fi
GPU_ALL_PART=${GPU_ALL_PART:-main}
MQAR_CONTROL_VARIANTS=${MQAR_CONTROL_VARIANTS:-profile=}
MQAR_CONTROL_SEEDS=${MQAR_CONTROL_SEEDS:-42,43,44,45,46,47}
[[ $MQAR_CONTROL_SEEDS =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "MQAR_CONTROL_SEEDS must be seeds like 42,43,44, got" \
  "'$MQAR_CONTROL_SEEDS'" >&2; exit 2; }
OUT=${OUT:-work_dirs/gpu/out}
RES=results/gpu
RUN=work_dirs/gpu/run          # this call's own logs, packed under gpu_run/
mkdir -p "$OUT" "$RUN" work_dirs/gpu/logs
OUT=$(cd "$OUT" && pwd)
rm -f "$RUN"/*
# what results/gpu held when the call started: a result that is gone at the end (a job cut or failed after snakemake
# deleted its old output) is listed in gpu_run/results_removed.txt, and scripts/gpu_unpack.sh deletes it there too
find "$RES" -type f 2>/dev/null | sort > "$RUN/results_at_start.txt"
exec > >(tee -a "$RUN/gpu_run.log") 2>&1

left() { echo $(( TOTAL_S - PACK_S - KILL_S - SECONDS )); }  # a step's cap: it ends by then + KILL_S at the latest
# results/gpu and snakemake's records (path, time, size), as taken in section 4 into $RUN/sent.txt
snapshot() { find "$RES" .snakemake/metadata -type f -printf '%p %T@ %s\n' 2>/dev/null | LC_ALL=C sort; }
# the files of the snapshot's folders this call wrote: new, or with another time or size than when it was taken
# (none when the call stopped before it)
written() { [[ -f $RUN/sent.txt ]] && LC_ALL=C comm -13 "$RUN/sent.txt" <(snapshot) | cut -d' ' -f1; }

pack() {  # everything this call produced -> $OUT/gpu_results.tar.gz (<= 16 MiB), whatever happened before
  local rc=$? stage cap=1048576 f
  set +e
  stage=$(mktemp -d /tmp/gpu_pack.XXXXXX)  # one of its own: two runs of this script on one machine must not collide
  mkdir -p "$stage/gpu_run" "$stage/work_dirs/gpu/logs"
  comm -23 "$RUN/results_at_start.txt" <(find "$RES" -type f 2>/dev/null | sort) > "$RUN/results_removed.txt"
  # the results/gpu files this call wrote (with the profile's rendered tables and figures, render_dir
  # results/gpu/report), and no other: a file it only received would, unpacked over a newer local one (an earlier
  # call's, unpacked after this call was sent), bring the old one back (5638e28: mqar.csv)
  local changed=()
  mapfile -t changed < <(written)
  printf '%s\n' "${changed[@]}" | grep "^$RES/" | tr '\n' '\0' | xargs -0 -r cp -a --parents -t "$stage"
  # snakemake's records of those files (params, code, inputs of the job that made each): carried back in with the
  # next call (.snakemake/metadata), they let that call re-run what a change of config or code made stale
  printf '%s\n' "${changed[@]}" | grep "^\.snakemake/metadata/" | "$PY" -c '
import base64, os, shutil, sys
dst = sys.argv[1]
for record in sys.stdin.read().split():
    name = os.path.basename(record)
    try:
        path = base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode()
    except ValueError:
        continue
    if path.startswith("results/gpu/"):
        os.makedirs(dst, exist_ok=True)
        shutil.copy2(record, dst)
' "$stage/snakemake_metadata"
  while (( cap >= 16384 )); do  # logs: the last $cap bytes of each
    rm -rf "$stage/gpu_run" "$stage/work_dirs/gpu/logs" && mkdir -p "$stage/gpu_run" "$stage/work_dirs/gpu/logs"
    for f in work_dirs/gpu/logs/*.log; do [[ -f $f ]] && tail -c "$cap" "$f" > "$stage/$f"; done
    for f in "$RUN"/*; do [[ -f $f ]] && tail -c "$cap" "$f" > "$stage/gpu_run/$(basename "$f")"; done
    cp "$RUN"/results_*.txt "$stage/gpu_run/" 2>/dev/null  # whole: a trimmed list would lose deletions
    echo "exit status $rc after ${SECONDS}s" > "$stage/gpu_run/status.txt"
    tar -czf "$OUT/gpu_results.tar.gz" -C "$stage" .
    (( $(stat -c %s "$OUT/gpu_results.tar.gz") <= 16 * 1024 * 1024 )) && break
    cap=$(( cap / 4 ))
  done
  echo "== packed $(tar -tzf "$OUT/gpu_results.tar.gz" | grep -vc '/$') files into $OUT/gpu_results.tar.gz" \
    "($(stat -c %s "$OUT/gpu_results.tar.gz") bytes) after ${SECONDS}s; exit status $rc"
  rm -rf "$stage"
  pack_jit
  exit "$rc"
}
pack_jit() {  # this call's JIT caches -> $OUT/jit_cache.tar.xz, when there are any and they fit one returned file
  # not `find | grep -q`: under pipefail, find dies of SIGPIPE once grep has quit, on any cache of real size
  [[ ${JIT_BACK:-1} == 1 && -d $JIT_DIR && -n $(find "$JIT_DIR" -type f -print -quit) ]] || return 0
  local part="$OUT/jit_cache.tar.xz.part"
  if timeout 60 tar -cf - -C "$JIT_DIR" . | xz -T0 -6 > "$part" && (( $(stat -c %s "$part") <= 16 * 1024 * 1024 )); then
    mv "$part" "$OUT/jit_cache.tar.xz"
    echo "== JIT caches packed: $OUT/jit_cache.tar.xz ($(stat -c %s "$OUT/jit_cache.tar.xz") bytes, from" \
      "$(du -sb "$JIT_DIR" | cut -f1) bytes)"
  else
    echo "== JIT caches not packed: $(du -sb "$JIT_DIR" | cut -f1) bytes, $(stat -c %s "$part" 2>/dev/null) as xz" \
      "(over 16 MiB, or tar/xz failed or took over 60 s)"
    rm -f "$part"
  fi
}
trap pack EXIT

JIT_DIR=${JIT_DIR:-/tmp/jit}
export TRITON_CACHE_DIR=$JIT_DIR/triton TILELANG_CACHE_DIR=$JIT_DIR/tilelang
export TRITON_CACHE_AUTOTUNING=1  # autotuning results go to the cache too (Triton keeps them in memory only by default)
mkdir -p "$TRITON_CACHE_DIR" "$TILELANG_CACHE_DIR"
if [[ -f .jit_cache/jit_cache.tar.xz ]]; then
  tar -xJf .jit_cache/jit_cache.tar.xz -C "$JIT_DIR" \
    && echo "== JIT caches unpacked from .jit_cache/jit_cache.tar.xz: $(find "$JIT_DIR" -type f | wc -l) files"
fi

export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export SUITE_COMMIT=${SUITE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}

# -- 1. wheels into /tmp/site ---------------------------------------------------------------------------------------
if (( DRY )); then
  PY=${PYTHON:-python3}
  NGPU=${NGPU:-1}
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
elif [[ -f /tmp/site/.suite_installed ]]; then  # an earlier gpu_run.sh of the same device command installed them
  PY=python3
  export PYTHONPATH="/tmp/site:$ROOT"
  echo "== wheels already in /tmp/site ($(cat /tmp/site/.suite_installed))"
  NGPU=$(python3 -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
else
  PY=python3
  wheels=()
  fallback=.whl_fallback
  if compgen -G ".whl_xz/*.tar.xz" > /dev/null; then
    rm -rf /tmp/gpu_wheels
    python3 -c 'import sys, tarfile; [tarfile.open(p).extractall(sys.argv[1], filter="data") for p in sys.argv[2:]]' \
      /tmp/gpu_wheels .whl_xz/*.tar.xz || exit 3
    wheels=(/tmp/gpu_wheels/*.whl)
    fallback=/tmp/gpu_wheels/fallback
  else
    for d in .whl .whl_tilelang; do compgen -G "$d/*.whl" > /dev/null && wheels+=("$d"/*.whl); done
  fi
  (( ${#wheels[@]} )) || { echo "no wheels: run scripts/gpu_wheels.sh here and carry .whl_xz (or .whl)" >&2; exit 3; }
  install() {
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$@" 2>&1 \
      | grep -v "^WARNING: Target directory" || true
  }
  echo "== installing ${#wheels[@]} wheels into /tmp/site ($(left)s left)"
  install "${wheels[@]}"
  z3=/tmp/site/z3/lib
  [[ -f $z3/libz3.so.4.15 && ! -e $z3/libz3.so ]] && ln -s libz3.so.4.15 "$z3/libz3.so"  # dropped from the wheel
  export PYTHONPATH="/tmp/site:$ROOT"
  # an image package whose version fails a carried package's requirement: its fallback wheel (gpu_wheels.py FALLBACK)
  read -r -a need <<< "$(python3 scripts/gpu_wheels.py check --installed --fallback-dir "$fallback" 2>/dev/null \
    | sed -n 's/^fallback: *//p')"
  if (( ${#need[@]} )); then
    echo "== the image's version fails a requirement; installing fallback wheels: ${need[*]##*/}"
    install "${need[@]}"
  fi
  echo "${#wheels[@]} wheels, $(date -u +%FT%TZ)" > /tmp/site/.suite_installed
  NGPU=$(python3 -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
fi

# -- 2. MPS: the GPU jobs' kernels run side by side -------------------------------------------------------------------
# Without it the GPU time-slices between processes, one context at a time. MPS (MPS=1, the default of the train,
# niah and mqar parts; 0 for the others and for TARGETS, which may name timing benchmarks) is a daemon of the
# driver's, listening in its own pipe folder: every process of this call is pointed at that folder, or, with MPS off,
# at an empty one, since CUDA's default folder (/tmp/nvidia-mps) is where a client looks when the variable is unset.
# Where the daemon is missing or a CUDA op through it fails, the jobs time-share the GPU as before. It changes no
# result, only how kernels are scheduled; but a fatal GPU fault in one client also ends the others.
MPS_STATE=$( (( DRY )) && echo "off (dry run)" || echo "off (MPS=0)")
start_mps() {
  local ctl d
  ctl=$(command -v nvidia-cuda-mps-control)
  for d in /usr/local/nvidia/bin /usr/bin /usr/local/cuda/bin; do
    [[ -z $ctl && -x $d/nvidia-cuda-mps-control ]] && ctl=$d/nvidia-cuda-mps-control
  done
  [[ -n $ctl ]] && export PATH="$(dirname "$ctl"):$PATH"  # the daemon starts nvidia-cuda-mps-server from there
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/suite-mps CUDA_MPS_LOG_DIRECTORY=/tmp/suite-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if [[ -z $ctl ]]; then
    MPS_STATE="off (nvidia-cuda-mps-control not on this machine)"
  elif ! { echo get_server_list | "$ctl" > /dev/null 2>&1 || "$ctl" -d; }; then
    MPS_STATE="off ($ctl -d failed)"
  elif ! timeout 60 python3 -c "import torch; assert torch.ones(4, device='cuda').sum().item() == 4" 2>&1; then
    echo quit | timeout 10 "$ctl"
    cp "$CUDA_MPS_LOG_DIRECTORY/control.log" "$RUN/mps_control.log" 2>/dev/null
    MPS_STATE="off (a CUDA op through the MPS daemon failed: daemon stopped, gpu_run/mps_control.log)"
  else
    MPS_STATE="on ($CUDA_MPS_PIPE_DIRECTORY)"
    return 0
  fi
  no_mps
}
no_mps() {  # this call's processes time-slice the GPU, also where a daemon listens in CUDA's default pipe folder
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/suite-no-mps
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY"
  unset CUDA_MPS_LOG_DIRECTORY
}
if (( MPS && ! DRY )); then start_mps; elif (( ! DRY )); then no_mps; fi
echo "== MPS: $MPS_STATE"

# -- 3. environment record --------------------------------------------------------------------------------------------
{
  echo "part: $WHAT ${TARGETS:-}; commit $SUITE_COMMIT; $(date -u +%FT%TZ); $NGPU GPU(s); MPS $MPS_STATE"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  "$PY" - "$DRY" <<'PY'
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
names = ("snakemake",) if sys.argv[1] == "1" else (
    "torch", "triton", "fla", "transformers", "snakemake", "lm_eval", "datasets", "tilelang")
for name in names:
    try:
        mod = importlib.import_module(name)
        print(f"{name} {getattr(mod, '__version__', '?')} ({mod.__file__})")
    except Exception as exc:  # noqa: BLE001 - a record, not a check
        print(f"{name}: not importable ({type(exc).__name__}: {exc})")
try:
    if sys.argv[1] == "1":
        sys.exit(0)
    import torch
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    print("cuda", torch.version.cuda, "devices", names)
    from models import kernels
    print("backend", kernels.describe("cuda" if torch.cuda.is_available() else "cpu"))
except Exception as exc:  # noqa: BLE001
    print("backend: not described", exc)
PY
  (( DRY )) || env -u PYTHONPATH python3 -m pip list --format=freeze > "$RUN/image_pip_freeze.txt" 2>/dev/null
  (( DRY )) || python3 scripts/gpu_wheels.py check --installed
} 2>&1 | grep -v "Warning" | tee "$RUN/env.log"

# -- 4. file times: results of earlier calls (unpacked, then carried here) count as up to date ------------------------
# Ageing hides changed code and config from snakemake's mtime check; its records (.snakemake/metadata, packed by the
# last call and unpacked by scripts/gpu_unpack.sh) still show them, so a stale result re-runs when they are carried.
if [[ -d $RES ]] && [[ -n $(find "$RES" -type f -name '*.csv' -print -quit) ]] && ! compgen -G ".snakemake/metadata/*" > /dev/null; then
  echo "== WARNING: results/gpu holds results but .snakemake/metadata was not carried: a result made with other" \
    "settings or code counts as up to date (carry .snakemake/metadata, README: GPU runs)"
fi
OLD=946684800  # 2000-01-01: code and data; results one day later
age() {
  find . \( -path ./.git -o -path ./results -o -path ./work_dirs -o -path "./.whl*" \) -prune -o -type f -print0 \
    | xargs -0 -r touch -h -d "@$OLD"
  [[ -d work_dirs/gpu/data ]] && find work_dirs/gpu/data -type f -print0 | xargs -0 -r touch -h -d "@$OLD"
  [[ -d $RES ]] && find "$RES" -type f -print0 | xargs -0 -r touch -h -d "@$((OLD + 86400))"
}
AGE=${AGE:-$(( DRY ? 0 : 1 ))}
(( AGE )) && age
(( DRY && ! AGE )) && echo "== DRY=1 plans by this checkout's file times (AGE=0); on the GPU machine (AGE=1) the" \
  "results/gpu files sent count as up to date, so a part re-runs only what is missing or stale by snakemake's records"
# results/gpu and snakemake's records as this call received them (path, time, size): pack() sends back only what
# differs at the end (written)
snapshot > "$RUN/sent.txt"

# -- 5. snakemake ---------------------------------------------------------------------------------------------------
# jobs that read a checkpoint of another job (checkpoints stay on the machine that trained them)
CONSUMERS=(lm_eval conversion_lm_eval conversion_cpt conversion_orthros)
TRAIN_RULES=(train "${CONSUMERS[@]}")  # the train part's GPU rules
# Every GPU rule declares `resources: gpu=N` itself (workflows/*.smk, tests/test_gpu_resources.py); --resources gpu=
# below says how many of them share the GPU. `bench` is this script's own: the timing benchmarks (GPU and CPU) hold
# it, and each runs in a step of its own (nothing else running), one at a time.
BENCH_RULES=(gpu_benchmarks fla_crosscheck seq_parallel prefill_cpu prefill_cpu_128k)
COMMON=(--cores all --config profile=gpu --keep-going --scheduler greedy --rerun-incomplete
        --set-resources "${BENCH_RULES[@]/%/:bench=1}")
(( DRY )) && COMMON+=(-n)
FAILED=0

smk() {  # smk NAME GPU_SLOTS MIN_S [snakemake args ...]: one invocation, capped by what is left of TOTAL_S, and
  local name=$1 slots=$2 min=$3 cap rc  # not started with less than MIN_S left (DRY: always)
  shift 3
  cap=$(left)
  (( DRY )) && min=1
  (( cap >= min )) || { echo "== $name: skipped, ${cap}s left (it needs ${min}s)"; FAILED=1; return 1; }
  echo "== $name (${cap}s left): snakemake ${*}"
  timeout -s TERM -k "$KILL_S" "$cap" env PART="$GPU_ALL_PART" "$PY" -m snakemake "${COMMON[@]}" \
    --resources gpu="$slots" bench=1 "$@" > "$RUN/$name.log" 2>&1
  rc=$?
  echo "   jobs: $(grep -E '^(local)?rule [a-z_0-9]+:$' "$RUN/$name.log" | awk '{sub(":", "", $2); print $2}' | sort \
    | uniq -c | awk '{printf "%s x%s  ", $2, $1}')"
  grep -E "steps \([0-9]+%\) done" "$RUN/$name.log" | tail -n 1
  grep -E -A2 "^Error in rule|Exception|MissingInput|Nothing to be done|^Terminating" "$RUN/$name.log" | head -n 20
  (( rc == 124 )) && echo "== $name: stopped at its time cap (${cap}s)"
  echo "== $name: exit status $rc, $(left)s left"
  (( rc )) && FAILED=1
  return "$rc"
}

missing() { local f; for f in "$@"; do [[ -e $f ]] || echo "$f"; done; }  # the files of "$@" that do not exist

TRAIN_T=("$RES/quality.csv" "$RES/ablation.csv" "$RES/conversion.csv")
PREFILL_CPU_T=("$RES/prefill_cpu.csv" "$RES/prefill_128k.csv")
NIAH_T=("$RES/niah.csv")
MQAR_T=("$RES/mqar.csv")
SLOTS=$GPU_JOBS

data_prep() {  # corpus + tokenizer (deterministic: data.source on the image), then aged as code
  (( DRY )) && return 0
  smk data "$SLOTS" 60 -- tokenizer || return 1
  (( AGE )) && find work_dirs/gpu/data -type f -print0 | xargs -0 -r touch -h -d "@$OLD"
  return 0
}

finish() {  # the end of every part of `all`, so that whichever part runs last completes the DAG: the CPU prefill
  # sweeps (timing, alone on the machine, where they are missing and 150 s are left), then controls.csv and the paper
  # tables and figures once every CSV they read is in results/gpu
  local absent
  if [[ -n $(missing "${PREFILL_CPU_T[@]}") ]]; then
    if (( DRY || $(left) >= 150 )); then
      smk prefill_cpu 0 150 --allowed-rules prefill_cpu prefill_cpu_128k -- "${PREFILL_CPU_T[@]}"
    else
      echo "== prefill_cpu: $(left)s left, it needs 150s: left to the next part"
    fi
  fi
  absent=$(missing "${TRAIN_T[@]}" "${NIAH_T[@]}" "${MQAR_T[@]}" "${PREFILL_CPU_T[@]}")
  if [[ -n $absent ]]; then
    echo "== controls and render wait for another part's CSVs: ${absent//$'\n'/ }"
    return 0
  fi
  data_prep || return 1  # controls reads the corpus and tokenizer (a DRY run plans them in the final step instead)
  smk final "$SLOTS" 30 --allowed-rules controls render corpus tokenizer benchmark_data prompt_lengths \
    -- "$RES/controls.csv" render
}

if (( PROBE && DRY )); then
  echo "== concurrency probe: skipped (dry run)"
elif (( PROBE && $(left) < 300 )); then
  echo "== concurrency probe: skipped, $(left)s left (it needs 300s)"
elif (( PROBE )); then  # how many GPU jobs at once pay (scripts/gpu_concurrency_probe.py), before the part
  rounds=$([[ $MPS_STATE == on* ]] && echo timeslice:9,mps:9,timeslice:9,mps:9,mps:18 || echo timeslice:9,timeslice:18)
  echo "== concurrency probe ($(left)s left): $rounds"
  timeout 200 "$PY" scripts/gpu_concurrency_probe.py --rounds "$rounds" --out "$RUN/concurrency_probe.csv" 2>&1 \
    | grep -v Warning | tail -n 7
  (( PIPESTATUS[0] )) && echo "== concurrency probe: exit status ${PIPESTATUS[0]} (a job failed or its cap ended it)"
fi

if (( MQAR_CONTROL && DRY )); then
  echo "== MQAR control calibration: skipped (dry run)"
elif (( MQAR_CONTROL )); then  # the MQAR positive control's first phase at several seeds and schedules, before the part
  echo "== MQAR control calibration ($(left)s left): variants '$MQAR_CONTROL_VARIANTS', seeds $MQAR_CONTROL_SEEDS"
  "$PY" scripts/gpu_mqar_control.py --variants "$MQAR_CONTROL_VARIANTS" --seeds "$MQAR_CONTROL_SEEDS" \
    --timeout "$(( $(left) > 60 ? $(left) - 30 : 30 ))" --out "$RUN/mqar_control.csv" --log-dir "$RUN" 2>&1 \
    | grep -v Warning | tail -n 40
  (( PIPESTATUS[0] )) && echo "== MQAR control calibration: exit status ${PIPESTATUS[0]} (a job failed or ran out of" \
    "time)"
fi

case $WHAT in
  none)  # only PROBE / MQAR_CONTROL above
    ;;
  train)
    data_prep
    # plan first: a job that reads a checkpoint made in an earlier call re-runs that training (scripts/gpu_plan.py);
    # again with those forced, since a forced job can read another earlier checkpoint (conversion <- transformer)
    force=()
    for round in 1 2 3; do
      if (( ${#force[@]} )); then smk plan "$SLOTS" 1 -n --forcerun "${force[@]}" -- "${TRAIN_T[@]}"
      else smk plan "$SLOTS" 1 -n -- "${TRAIN_T[@]}"; fi
      mapfile -t more < <("$PY" scripts/gpu_plan.py orphans "$RUN/plan.log" --consumers "${CONSUMERS[@]}" \
        --checkpoints "$RES/train/=work_dirs/gpu/runs/" "$RES/conversion/=work_dirs/gpu/conversion/" \
        | tr ' ' '\n' | grep . | grep -vxF -f <(printf '%s\n' "${force[@]}" | grep .))
      (( ${#more[@]} )) || break
      force+=("${more[@]}")
    done
    (( ${#force[@]} )) && echo "== re-training, its checkpoints stayed on an earlier machine: ${force[*]}"
    # training, conversion and lm-eval; the FLA archs compile their Triton (and GDN's TileLang) kernels for minutes
    # before their first step, so their main-size trainings start first
    read -r main_size seed0 < <("$PY" -c "import yaml; c = yaml.safe_load(open('profiles/gpu.yaml'))
print(c['main_size'], c['seeds'][0])")
    fla_first=()
    for arch in gdn gla retnet; do fla_first+=("$RES/train/$arch/$main_size/seed$seed0/metrics.csv"); done
    # TRAIN_THREADS a job for snakemake's scheduler: at the profile's 4, --cores 16 let only 4 jobs run however many
    # GPU slots there were, and three of them compiled FLA kernels for minutes (a46d38c: 25 of 33 steps in 470 s).
    # The jobs themselves still run the profile's 4 torch threads (OMP_NUM_THREADS, the run's config).
    smk train "$SLOTS" $(( DRY ? 1 : 60 )) ${force[@]:+--forcerun "${force[@]}"} \
      --set-threads "${TRAIN_RULES[@]/%/=$TRAIN_THREADS}" --prioritize "${fla_first[@]}" -- "${TRAIN_T[@]}"
    finish
    ;;
  niah)
    data_prep
    smk niah "$RECALL_JOBS" 60 --set-threads niah="$RECALL_THREADS" -- "${NIAH_T[@]}"
    finish
    ;;
  mqar)
    # MQAR_JOBS jobs at once, each batch started only with MQAR_BATCH_S left (a job cut by the cap loses its whole
    # run: measured, 18 at once finished 12 in 500 s; 9 at once under MPS take 290-370 s); widest models first (the controls')
    smk mqar_plan "$MQAR_JOBS" 1 -n -- "${MQAR_T[@]}"
    mapfile -t batches < <("$PY" scripts/gpu_plan.py batches "$RUN/mqar_plan.log" --rule mqar --size "$MQAR_JOBS")
    for i in "${!batches[@]}"; do
      read -r -a batch <<< "${batches[$i]}"
      (( ${#batch[@]} )) || continue  # (no targets would make snakemake run `all`)
      # one thread a job: 9 jobs x 2 threads would ask for more than the machine's 16 cores and start one job late
      smk "mqar$(( i + 1 ))" "$MQAR_JOBS" "$MQAR_BATCH_S" --set-threads mqar=1 -- "${batch[@]}"
    done
    # what is left of the grid (the plan is read from its log: `snakemake | grep -q` fails under pipefail)
    (( DRY )) || smk mqar_left "$MQAR_JOBS" 1 -n -- "${MQAR_T[@]}"
    if (( DRY )) || ! grep -qE '^(local)?rule mqar:$' "$RUN/mqar_left.log"; then
      # (a DRY run made none of the batches' files: it plans them again here)
      smk mqar_collect 1 30 --allowed-rules collect_mqar $( (( DRY )) && echo mqar) -- "${MQAR_T[@]}"
    else
      echo "== mqar: jobs of the grid are left; run PART=mqar again (it goes on where this call stopped)"
      FAILED=1
    fi
    finish
    ;;
  finish)
    finish
    ;;
  bench)
    smk gpu_benchmarks "$NGPU" 300 --allowed-rules gpu_benchmarks --forcerun gpu_benchmarks \
      -- "$RES/prefill.csv" "$RES/e2e.csv" "$RES/cost_model.csv"
    smk fla_crosscheck "$NGPU" "${CROSSCHECK_MIN_S:-300}" --allowed-rules fla_crosscheck --forcerun fla_crosscheck \
      -- "$RES/fla_crosscheck.csv" "$RES/baseline_throughput.csv"
    if (( NGPU >= 2 )); then
      smk seq_parallel "$NGPU" 240 --allowed-rules seq_parallel --forcerun seq_parallel -- "$RES/seq_parallel.csv"
    fi
    ;;
  targets)
    (( DATA_PREP )) && data_prep  # targets that read the corpus or tokenizer (e.g. controls.csv)
    read -r -a targets <<< "$TARGETS"
    read -r -a force <<< "${FORCE:-}"
    # as in the train, niah and mqar parts
    threads=(--set-threads niah="$RECALL_THREADS" mqar="$RECALL_THREADS" "${TRAIN_RULES[@]/%/=$TRAIN_THREADS}")
    if (( ${#force[@]} )); then smk targets "$SLOTS" 30 "${threads[@]}" --forcerun "${force[@]}" -- "${targets[@]}"
    else smk targets "$SLOTS" 30 "${threads[@]}" -- "${targets[@]}"; fi
    ;;
esac

echo "== results/gpu CSVs written by this call:"
written | grep "^$RES/" | sed 's/^/   /' | head -n 80
exit "$FAILED"
