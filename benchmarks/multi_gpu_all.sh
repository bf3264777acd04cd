#!/usr/bin/env bash
# Multi-GPU benchmarks on one host with NPROC (default 2) GPUs, one command of about 6 minutes:
#   1. seq_parallel_gpu (torchrun): Orthros and Transformer prefill at 1 and NPROC GPUs, 128K..1M, Qwen3-8B shape,
#      cost-model predictions and within-15% checks                                  -> $OUT/seq_parallel.csv
#   2. (meanwhile, on the CPU) the gpu profile's stdlib corpus and 4K BPE tokenizer
#   3. suite.train.run: 160M (~120M parameters at the 4K vocabulary), bf16 autocast, T=2048, global batch 16,
#      on 1 GPU, then on NPROC GPUs under torchrun (FSDP2, 16/NPROC rows per rank)
#   4. multi_gpu_train: throughput (>= 1.8x target) and loss curves 1 vs NPROC GPUs   -> $OUT/multi_gpu_train.csv
# Every step writes its CSV row by row or at its end under a time cap, so a cut step keeps what it measured.
# The command of the DAG's rule multi_gpu (workflows/bench.smk), which passes OUT (<results>/perf/multi_gpu), WORK,
# NPROC (its resources.gpu), SMOKE (1 in a CPU profile) and PYTHON. TOTAL_S (default 520) caps the whole command,
# lowered to what is left before SUITE_DEADLINE (run.sh's TIME_CAP); WORK (default /tmp/multi_gpu_work) holds data
# and checkpoints (never under OUT: a 160M checkpoint with optimizer state is ~1.5 GB); ARCH (default orthros) is the
# trained arch. SMOKE=1: a CPU/gloo miniature of all of it (tests/test_multi_gpu.py); DATA_DIR reuses a prepared data
# folder.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-results/gpu}
WORK=${WORK:-/tmp/multi_gpu_work}
NPROC=${NPROC:-2}
TOTAL_S=${TOTAL_S:-520}
if [[ -n "${SUITE_DEADLINE:-}" ]] && (( SUITE_DEADLINE - $(date +%s) < TOTAL_S )); then
  TOTAL_S=$(( SUITE_DEADLINE - $(date +%s) ))  # the caller's own cap (run.sh's TIME_CAP) comes first
fi
ARCH=${ARCH:-orthros}
PY=${PYTHON:-python3}
RUN=("$PY" -m torch.distributed.run --standalone --nproc_per_node "$NPROC")
mkdir -p "$OUT" "$WORK"

if [[ "${SMOKE:-0}" == 1 ]]; then
  CONFIG=ci
  TRAIN=(--size 1M --steps 4 --batch-size 4 --seq-len 64 --warmup 1 --val-batches 1 --lr 3e-3 --device cpu
         --dtype float32 --retrieval-fraction 0)
  SP=(--device cpu --dtype float32 --size 1M --lengths 64,128 --layer-wise-from transformer=128 --repeats 1)
  SKIP=1
  export OMP_NUM_THREADS=1
else
  CONFIG=gpu
  TRAIN=(--size 160M --steps 40 --batch-size 16 --seq-len 2048 --warmup 5 --val-batches 2 --lr 3e-4 --device cuda
         --dtype bfloat16)
  SP=()
  SKIP=5
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvidia-smi topo -m; } \
    > "$OUT/multi_gpu_env.log" 2>&1 || true
fi

left() { echo $(( TOTAL_S - SECONDS )); }
cap() { local want=$1 l; l=$(left); (( l < want )) && want=$l; (( want < 1 )) && want=1; echo "$want"; }

DATA=${DATA_DIR:-$WORK/data}
if [[ ! -f "$DATA/corpus.json" || ! -d "$DATA/tokenizer" ]]; then
  ( "$PY" -m suite.data.corpus --config "$CONFIG" --data-dir "$DATA" \
      && "$PY" -m suite.data.tokenizer --config "$CONFIG" --data-dir "$DATA" ) > "$OUT/multi_gpu_data.log" 2>&1 &
  DATA_PID=$!
fi

echo "== seq_parallel_gpu on 1 and $NPROC ranks ($(left)s left)"
SP_CAP=$(cap 300)
timeout "$SP_CAP" "${RUN[@]}" -m benchmarks.seq_parallel_gpu --out "$OUT/seq_parallel.csv" \
  --budget-s $(( SP_CAP - 90 > 30 ? SP_CAP - 90 : 30 )) "${SP[@]}" 2>&1 | tee "$OUT/seq_parallel.log"

if [[ -n "${DATA_PID:-}" ]]; then
  echo "== waiting for the corpus and tokenizer ($(left)s left)"
  wait "$DATA_PID" || { echo "data preparation failed: see $OUT/multi_gpu_data.log" >&2; }
fi

echo "== train $ARCH on 1 GPU ($(left)s left)"
COMMON=(--config "$CONFIG" --arch "$ARCH" --data-dir "$DATA" --seed 0 --no-progress --overwrite "${TRAIN[@]}")
timeout "$(cap 130)" "$PY" -m suite.train.run "${COMMON[@]}" --out-dir "$WORK/train1" 2>&1 | tee "$OUT/train_1gpu.log"
echo "== train $ARCH on $NPROC GPUs, FSDP2 ($(left)s left)"
timeout "$(cap 130)" "${RUN[@]}" -m suite.train.run "${COMMON[@]}" --out-dir "$WORK/train$NPROC" --parallel fsdp \
  2>&1 | tee "$OUT/train_${NPROC}gpu.log"
"$PY" -m benchmarks.multi_gpu_train --one "$WORK/train1" --many "$WORK/train$NPROC" --skip "$SKIP" \
  --out "$OUT/multi_gpu_train.csv" 2>&1 | tee "$OUT/multi_gpu_train.log"
for run in train1 "train$NPROC"; do  # the curves, without the checkpoints
  [[ -f "$WORK/$run/loss.csv" ]] && cp "$WORK/$run/loss.csv" "$OUT/${run}_loss.csv"
done
echo "== done in ${SECONDS}s; CSVs in $OUT"
