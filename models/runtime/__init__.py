"""The inference runtime: one per-layer step (:mod:`.layer`) that every inference path runs.

* :mod:`.layer`: :class:`LayerStep`, one layer's math before and after attention; fused GEMMs and
  ``torch.compile`` are its options;
* :mod:`.kv`: K/V stores (dense, FP8, the decode engine's static cache);
* :mod:`.prefill`: prefill, whole or in chunks (:func:`prefill`, :class:`PrefillRunner`);
* :mod:`.decode`: the generation engine (:class:`Engine`: static cache, CUDA graphs);
* :mod:`.seq_parallel`: sequence-parallel prefill over torch.distributed ranks.

Attention itself is :mod:`models.kernels`; the Orthros projections (Eqs. 4-5) are :mod:`models.attention`.
Benchmarks (``benchmarks/``) call this package and never reach into mixers.
"""
from .layer import LayerStep
from .prefill import PrefillRunner, prefill

__all__ = ["LayerStep", "PrefillRunner", "prefill"]
