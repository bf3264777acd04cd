#!/usr/bin/env bash
# Download, HERE (a machine with the package index), every wheel the offline GPU image lacks to run the DAG
# (README: GPU runs), check that nothing is missing, and pack them for the trip. All outputs are git-ignored:
#   .whl/            FLA 0.6.0, transformers 5.24.0, snakemake 9.27.1 + plugins, lm-eval 0.4.13, datasets, ... and
#                    whatever they need that the image (scripts/gpu_image_packages.txt) lacks; MANIFEST.txt
#   .whl_tilelang/   tilelang 0.1.15, apache-tvm-ffi 0.1.12, torch-c-dlpack-ext 0.1.5, z3-solver 4.15.4 (GatedDeltaNet's
#                    backward on Hopper with Triton < 3.7.1)
#   .whl_xz/wheels.tar.xz  both folders as ONE solid xz (~54 MB): what a device call carries. As wheels they are
#                    ~102 MB, far over the 64 MiB that one call carries with the repo (~6 MB).
# Two wheels are slimmed (SLIM in scripts/gpu_wheels.py): z3-solver without its command-line binary and second libz3
# copy, PuLP without its CBC binaries (snakemake then schedules greedily).
# Versions: the local venv's installed ones (PYTHON, default .venv/bin/python, else python3), the
# tilelang pins in scripts/gpu_wheels.py. Writes scripts/gpu_wheels.lock, scripts/gpu_wheels_tilelang.lock and
# scripts/gpu_wheels.requires.json (commit them: tests/test_gpu_wheels.py checks them without the wheels).
# Usage (repository root or anywhere): bash scripts/gpu_wheels.sh    (~10 minutes of xz on 2 busy cores)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
  for p in .venv/bin/python python3; do
    command -v "$p" > /dev/null && PYTHON=$p && break
  done
fi
echo "python: $PYTHON ($("$PYTHON" --version))"
PLATFORMS=(--platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform manylinux2014_x86_64)
for n in $(seq 5 39); do PLATFORMS+=(--platform "manylinux_2_${n}_x86_64"); done
TARGET=(--only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}")
mkdir -p .whl .whl_tilelang .whl_fallback

fetch() {  # fetch DIR NAME==VERSION: a binary wheel for the GPU machine, else a pure-Python wheel built from the sdist
  local dir=$1 spec=$2 tmp
  tmp=$(mktemp -d)
  if ! "$PYTHON" -m pip download -q --no-deps "${TARGET[@]}" -d "$tmp" "$spec" 2>"$tmp.err"; then
    echo "  $spec: no wheel for cp312 manylinux x86_64, building one from the sdist"
    "$PYTHON" -m pip wheel -q --no-deps -w "$tmp" "$spec" >/dev/null 2>>"$tmp.err" \
      || { cat "$tmp.err" >&2; exit 1; }
    compgen -G "$tmp/*-py3-none-any.whl" >/dev/null || compgen -G "$tmp/*-py2.py3-none-any.whl" >/dev/null \
      || { echo "$spec: the wheel built from its sdist is not pure Python: $(ls "$tmp")" >&2; exit 1; }
  fi
  mv "$tmp"/*.whl "$dir/"
  rm -rf "$tmp" "$tmp.err"
}

have() {  # have DIR NAME VERSION: a wheel of exactly this name and version is in DIR
  compgen -G "$1/$(echo "$2" | tr - _)-$3-*.whl" >/dev/null || compgen -G "$1/$2-$3-*.whl" >/dev/null
}

# 1. tilelang's pinned wheels first: their metadata takes part in the resolution
for spec in tilelang==0.1.15 apache-tvm-ffi==0.1.12 torch-c-dlpack-ext==0.1.5 z3-solver==4.15.4.0; do
  have .whl_tilelang "${spec%%==*}" "${spec##*==}" || fetch .whl_tilelang "$spec"
done

# 2. resolve both groups (local venv versions minus the image's packages), fetch what is not there yet, drop the rest
"$PYTHON" scripts/gpu_wheels.py resolve --wheel-dir .whl_tilelang > .whl/resolved.txt
for dir in .whl .whl_tilelang .whl_fallback; do
  wanted=()
  while read -r group spec; do
    [[ "$group" == "$dir" ]] || continue
    wanted+=("$spec")
    have "$dir" "${spec%%==*}" "${spec##*==}" || fetch "$dir" "$spec"
  done < .whl/resolved.txt
  for whl in "$dir"/*.whl; do  # keep ONE version of each: a wheel no longer resolved goes
    [[ -e $whl ]] || continue
    base=$(basename "$whl")
    keepit=0
    for spec in "${wanted[@]}"; do
      n=$(echo "${spec%%==*}" | tr - _); v=${spec##*==}
      shopt -s nocasematch
      [[ "$base" == "$n-$v-"* || "$base" == "${spec%%==*}-$v-"* ]] && keepit=1
      shopt -u nocasematch
    done
    (( keepit )) || { echo "  removing $base (not resolved)"; rm -f "$whl"; }
  done
done
rm -f .whl/resolved.txt
DIRS=(--wheel-dir .whl --wheel-dir .whl_tilelang --wheel-dir .whl_fallback)
"$PYTHON" scripts/gpu_wheels.py slim "${DIRS[@]}"  # see SLIM in gpu_wheels.py

# 3. locks, Requires-Dist snapshot, manifest, sizes
"$PYTHON" scripts/gpu_wheels.py lock "${DIRS[@]}"  # also writes .whl/MANIFEST.txt
cat .whl/MANIFEST.txt
# 4. every requirement met by the image or a wheel
"$PYTHON" scripts/gpu_wheels.py check "${DIRS[@]}"

# 5. the transport: both folders as one solid xz (.whl_xz/wheels.tar.xz), since as wheels they are far over the 64 MiB
#    that one call carries with the repo; minutes of xz, skipped when the wheel list did not change
"$PYTHON" scripts/gpu_wheels.py pack "${DIRS[@]}"
repo=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -n1 | cut -f1)
whl=$(du -cb .whl/*.whl | tail -n1 | cut -f1)
tl=$(du -cb .whl_tilelang/*.whl | tail -n1 | cut -f1)
fb=$(du -cb .whl_fallback/*.whl | tail -n1 | cut -f1)
xzb=$(stat -c %s .whl_xz/wheels.tar.xz)
limit=$((64 * 1024 * 1024))
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
echo "sizes: .whl $(ls .whl/*.whl | wc -l) wheels $(mb "$whl"), .whl_tilelang $(ls .whl_tilelang/*.whl | wc -l)" \
  "wheels $(mb "$tl"), .whl_fallback $(ls .whl_fallback/*.whl | wc -l) wheels $(mb "$fb");" \
  ".whl_xz/wheels.tar.xz (all of them) $(mb "$xzb"); tracked repo files $(mb "$repo")"
echo "one call: repo + .whl_xz = $(mb $((repo + xzb))), repo + .whl = $(mb $((repo + whl))) of 64 MiB = $(mb "$limit")"
(( repo + xzb < limit )) || { echo "repo + .whl_xz is over 64 MiB: it cannot travel" >&2; exit 1; }
