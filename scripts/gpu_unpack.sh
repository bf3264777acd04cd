#!/usr/bin/env bash
# Unpack an archive that scripts/gpu_run.sh packed on the GPU machine into this repository, then show what changed:
#   results/gpu/...            -> results/gpu/... (only the files the call wrote, overlaid: the others stay as they are)
#   paper_tables/, figures/    -> the same paths (archives of older gpu_run.sh versions; the gpu profile now
#                                 renders into results/gpu/report/)
#   work_dirs/gpu/logs/*.log   -> work_dirs/gpu/logs/ (git-ignored; the rules' logs)
#   snakemake_metadata/        -> .snakemake/metadata/ (snakemake's records of those results; carry the folder to the
#                                 next call so that it re-runs results that changed settings or code made stale)
#   gpu_run/results_removed.txt   results/gpu files the call deleted (a job cut or failed after snakemake removed its
#                                 old output): deleted here too, with their snakemake records, so that an old result
#                                 does not pass for the new one
#   gpu_run/                   -> work_dirs/gpu/logs/gpu_run/ (that call's own logs: env.log, one log per snakemake
#                                 step, the image's pip freeze, status.txt)
#   jit_cache.tar.xz           -> .jit_cache/jit_cache.tar.xz, when it lies beside ARCHIVE (the call's Triton and
#                                 TileLang caches; carry .jit_cache to the next call to skip their compilation)
# Usage: bash scripts/gpu_unpack.sh ARCHIVE   (e.g. the files_at folder of the device call + /gpu_results.tar.gz)
set -euo pipefail
[[ $# -eq 1 && -f "$1" ]] || { echo "usage: $0 ARCHIVE (a gpu_results.tar.gz from scripts/gpu_run.sh)" >&2; exit 2; }
ARCHIVE=$(realpath "$1")
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$ARCHIVE" -C "$tmp" -m  # -m: files get the time of unpacking (the GPU machine sets old times, gpu_run.sh)

links=$(cd "$tmp" && find . ! -type f ! -type d)
[[ -z $links ]] || { echo "refusing: the archive holds links or special files: $links" >&2; exit 1; }
stray=$(cd "$tmp" && find . -type f | sed 's#^\./##' \
  | grep -vE '^(results/gpu|paper_tables|figures|work_dirs/gpu/logs|gpu_run|snakemake_metadata)/' || true)
for f in $stray; do  # a result or log anywhere else is refused; anything else is left out
  case $f in
    results/*|work_dirs/*) echo "refusing: $f is outside results/gpu and work_dirs/gpu/logs" >&2; exit 1 ;;
  esac
  echo "ignoring $f (not something gpu_run.sh packs)" >&2
  rm -f "$tmp/$f"
done

for d in results paper_tables figures work_dirs; do
  [[ -d "$tmp/$d" ]] && mkdir -p "$d" && cp -R "$tmp/$d/." "$d/"
done
if [[ -d "$tmp/snakemake_metadata" ]]; then
  mkdir -p .snakemake/metadata && cp "$tmp"/snakemake_metadata/* .snakemake/metadata/
fi
if [[ -f "$tmp/gpu_run/results_removed.txt" ]]; then
  while IFS= read -r f; do
    [[ $f == results/gpu/* && $f != *..* ]] || { echo "ignoring removed-result entry '$f' (not under results/gpu)" >&2
                                                 continue; }
    [[ -e $f || -L $f ]] || continue
    [[ -f $f || -L $f ]] || { echo "ignoring removed-result entry '$f' (not a file here)" >&2; continue; }
    rm -f -- "$f" ".snakemake/metadata/$(printf %s "$f" | base64 -w0 | tr '+/' '-_')"
    echo "== removed $f: the call deleted it (its job was cut or failed), so it is made again by the next call"
  done < "$tmp/gpu_run/results_removed.txt"
fi
if [[ -d "$tmp/gpu_run" ]]; then
  rm -rf work_dirs/gpu/logs/gpu_run && mkdir -p work_dirs/gpu/logs && cp -R "$tmp/gpu_run" work_dirs/gpu/logs/gpu_run
fi

if [[ -f "$(dirname "$ARCHIVE")/jit_cache.tar.xz" ]]; then
  mkdir -p .jit_cache && cp "$(dirname "$ARCHIVE")/jit_cache.tar.xz" .jit_cache/jit_cache.tar.xz
  echo "== JIT caches: .jit_cache/jit_cache.tar.xz ($(stat -c %s .jit_cache/jit_cache.tar.xz) bytes; carry .jit_cache)"
fi
echo "== unpacked $(find "$tmp" -type f | wc -l) files from $ARCHIVE"
[[ -f work_dirs/gpu/logs/gpu_run/status.txt ]] && echo "   call: $(cat work_dirs/gpu/logs/gpu_run/status.txt)"
[[ -f work_dirs/gpu/logs/gpu_run/env.log ]] && head -n 3 work_dirs/gpu/logs/gpu_run/env.log | sed 's/^/   /'
echo "== logs: work_dirs/gpu/logs/ (this call's own: work_dirs/gpu/logs/gpu_run/)"
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  echo "== git status (results/gpu, paper_tables, figures):"
  git status --short -- results/gpu paper_tables figures
  git diff --stat -- results/gpu paper_tables figures | tail -n 1
else
  echo "== files written (not a git checkout):"
  (cd "$tmp" && find results paper_tables figures -type f 2>/dev/null | sort | sed 's/^/   /') || true
fi
