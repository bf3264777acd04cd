#!/usr/bin/env bash
# Put an archive that tools/offline_gpu/run.sh packed on the GPU host into this checkout, then show what changed:
# its results/gpu files overlay the ones here, the results/gpu files the run deleted are deleted here too, and the
# logs go to work_dirs/gpu/logs/ (the run's own under run/). Nothing else is written.
# Usage: bash tools/offline_gpu/unpack.sh gpu_results.tar.gz
set -euo pipefail
[[ $# -eq 1 && -f "$1" ]] || { echo "usage: $0 ARCHIVE (a gpu_results.tar.gz of tools/offline_gpu/run.sh)" >&2
                               exit 2; }
ARCHIVE=$(realpath "$1")
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$ARCHIVE" -C "$tmp"
odd=$(cd "$tmp" && find . ! -type f ! -type d; find . -type f | grep -vE '^\./(results/gpu|logs)/' || true)
[[ -z $odd ]] || { echo "refusing: the archive holds what run.sh does not pack: $odd" >&2; exit 1; }
[[ -d $tmp/results/gpu ]] && mkdir -p results/gpu && cp -R "$tmp/results/gpu/." results/gpu/
if [[ -f $tmp/logs/run/results_removed.txt ]]; then
  while IFS= read -r f; do
    [[ $f == results/gpu/* && $f != *..* && -f $f ]] || continue
    rm -f -- "$f" && echo "== removed $f (the run deleted it)"
  done < "$tmp/logs/run/results_removed.txt"
fi
mkdir -p work_dirs/gpu/logs && rm -rf work_dirs/gpu/logs/run && cp -R "$tmp/logs/." work_dirs/gpu/logs/
echo "== $ARCHIVE: $(cat work_dirs/gpu/logs/run/status.txt 2>/dev/null); logs in work_dirs/gpu/logs/"
git status --short -- results/gpu 2>/dev/null || true
