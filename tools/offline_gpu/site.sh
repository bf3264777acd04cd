# Sourced (from the repository root) by the GPU scripts on a host without internet access: the wheels built
# elsewhere (tools/offline_gpu/wheels.py build -> .whl.tar) are installed into SITE (default /tmp/site) once per
# archive and put on PYTHONPATH. Without .whl.tar nothing happens: a host with a package index installs the suite
# with pip as usual. PYTHON picks the interpreter (default python3).
if [[ -f .whl.tar ]]; then
  SITE=${SITE:-/tmp/site}
  _sum=$(cksum < .whl.tar)
  if [[ "$(cat "$SITE/.whl.tar.cksum" 2>/dev/null)" != "$_sum" ]]; then
    _tmp=$(mktemp -d)
    if tar -xf .whl.tar -C "$_tmp" && rm -rf "$SITE" && "${PYTHON:-python3}" -m pip install -q --no-index \
        --no-deps --no-compile --target "$SITE" "$_tmp"/*.whl; then
      echo "$_sum" > "$SITE/.whl.tar.cksum"
      echo "== $(ls "$_tmp"/*.whl | wc -l) wheels from .whl.tar installed into $SITE"
    else
      echo "== installing .whl.tar into $SITE failed" >&2
    fi
    rm -rf "$_tmp"
  fi
  export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
