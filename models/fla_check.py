"""The one version check in front of everything the suite takes from flash-linear-attention (FLA) below its API.

Two modules reach below FLA's public layers, and both go through :func:`check_fla_version` first:

* :mod:`baselines.fla_internals` (the CPU route patches FLA module globals and class methods; Orthros-H's GDN
  re-runs ``GatedDeltaNet`` from the layer's attributes), through its ``install()``;
* :mod:`models.kernels`' ``fla-window`` kernel, through :func:`window_kernel`: FLA's Triton
  ``fla.ops.attn.parallel.parallel_attn`` called token-major with ``window_size``, whose int32 query offsets
  ``models.kernels.fla_offsets_overflow`` encodes (FLA 0.6's ``parallel_attn_fwd_kernel``).

Neither is a promise of FLA's: a release may rename, re-sign or re-layout them, and a patch or a limit that no longer
matches fails silently (the original kernel runs, a wrong tensor is read, an overflowing length is let through).
So an FLA version not in :data:`CHECKED_FLA_VERSIONS` is refused with a RuntimeError naming both. To move to a new
release, run tests/test_baselines.py, tests/test_kernels.py and the GPU checks (``benchmarks/fla_vs_naive.py``,
``benchmarks/attn_kernels.py``) on it, then add its version here and pin it in pyproject.toml.

This module sits in ``models/`` (the bottom package) so that both users can import it; it imports FLA only when
called.
"""
from __future__ import annotations

# FLA releases the suite's uses of FLA internals were checked against (tests/test_baselines.py and tests/test_kernels.py
# on CPU, benchmarks/fla_vs_naive.py and benchmarks/attn_kernels.py on an H200); pyproject.toml pins the same release.
CHECKED_FLA_VERSIONS = ("0.6.0",)


def check_fla_version(installed: str | None = None) -> str:
    """The installed FLA version (``fla.__version__``, or ``installed``) if the suite was checked against it.

    Raises:
        RuntimeError: naming the installed version and the checked ones, for any other version.
    """
    if installed is None:
        import fla

        installed = str(getattr(fla, "__version__", "unknown"))
    if installed not in CHECKED_FLA_VERSIONS:
        raise RuntimeError(
            f"flash-linear-attention {installed} is installed, but the suite's uses of FLA internals were checked "
            f"against flash-linear-attention {', '.join(CHECKED_FLA_VERSIONS)} only: baselines/fla_internals.py "
            f"patches FLA module globals (CPU route) and re-implements GatedDeltaNet from FLA layer attributes "
            f"(Orthros-H), models/kernels.py calls fla.ops.attn.parallel.parallel_attn and relies on its int32 "
            f"offset limit; none of this is FLA API. Install flash-linear-attention=={CHECKED_FLA_VERSIONS[-1]} "
            f"(pyproject.toml), or check these modules against {installed} (models/fla_check.py says how) and add it "
            f"to CHECKED_FLA_VERSIONS.")
    return installed


def window_kernel():
    """FLA's Triton sliding-window attention ``parallel_attn`` after :func:`check_fla_version`, or None when FLA (or
    the kernel module, e.g. without a working Triton) does not import.

    Raises:
        RuntimeError: FLA imports but is a version the suite was not checked against.
    """
    try:
        import fla  # noqa: F401
    except Exception:  # FLA absent, or broken
        return None
    check_fla_version()
    try:
        from fla.ops.attn.parallel import parallel_attn
    except Exception:
        return None
    return parallel_attn
