#!/usr/bin/env bash
# Second H200 command: NIAH to 128K with the default profile's trained checkpoints (Fig. 3's 128K column), then the
# FLA Triton-vs-naive cross-check and per-architecture training throughput (issue 3).
# Usage: CKPT=<folder with <arch>/ checkpoints, tokenizer/ and test.txt> OUT=<dir> bash suite/bench/gpu_quality.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
CKPT=${CKPT:-.gpu_carry}
OUT=${OUT:-results/gpu}
RES=results/gpu
TOTAL_S=${TOTAL_S:-560}
NIAH_S=${NIAH_S:-260}
mkdir -p "$OUT" "$RES/niah"
left() { echo $(( TOTAL_S - SECONDS )); }

for arch in ${ARCHS:-orthros transformer swa gdn gla retnet}; do
  [[ -d "$CKPT/$arch" ]] || { echo "== niah $arch: no checkpoint, skipped"; continue; }
  budget=$(( NIAH_S - SECONDS )); (( budget < 10 )) && { echo "== niah $arch: NIAH budget spent"; break; }
  echo "== niah $arch (${budget}s left for NIAH)"
  timeout "$budget" python3 -m suite.eval.niah --checkpoint "$CKPT/$arch" --tokenizer "$CKPT/tokenizer" \
    --haystack "$CKPT/test.txt" --lengths 4096,32768,131072 --depths 0.1,0.5,0.9 --trials 1 --device cuda \
    --dtype bfloat16 --profile gpu --arch "$arch" --size 1M --out "$RES/niah/$arch.csv" 2>&1 | grep -v Warning | tail -n 12
done
python3 -m suite.collect concat --inputs "$RES"/niah/*.csv --out "$RES/niah.csv"

echo "== fla_vs_naive ($(left)s left)"
cp "$RES/niah.csv" "$OUT/" 2>/dev/null
timeout "$(( $(left) > 20 ? $(left) - 10 : 10 ))" python3 -m suite.bench.fla_vs_naive --out-dir "$RES" ${FLA_ARGS:-} 2>&1 \
  | grep -v Warning | tail -n 40
for f in niah.csv fla_crosscheck.csv baseline_throughput.csv; do
  [[ -f "$RES/$f" && "$(realpath "$RES")" != "$(realpath "$OUT")" ]] && cp "$RES/$f" "$OUT/"
done
echo "== done in ${SECONDS}s"
