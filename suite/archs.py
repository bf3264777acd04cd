"""Sets of architecture names that code outside ``models/`` and ``baselines/`` branches on.

Explicit names, never a prefix test: ``arch.startswith("orthros")`` would also take in any later arch whose name
happens to start that way. Kept free of heavy imports: the DAG (workflows/common.smk) reads it while parsing.
"""

# The registered architectures built from Orthros layers (two streams, base-stream window w): Orthros, its w/o-SO
# ablation and the Orthros-H hybrid (Orthros layers 1:3 with GDN). Each takes the Orthros window (the study config's
# ``window``, a benchmark's ``--window``) as its ``window_size``.
ORTHROS_ARCHS = frozenset({"orthros", "orthros_noso", "orthros_h"})

# The paper's Orthros window w (tokens, the token itself included): the default of every benchmark's --window.
PAPER_WINDOW = 128

# The architectures with a sliding window in their attention: the Orthros family (base stream) and SWA.
WINDOWED_ARCHS = ORTHROS_ARCHS | {"swa"}

# The architectures whose attention uses RoPE (Orthros's two streams, the Transformer, SWA): a RoPE setting such as
# suite.experiments.niah.run's --rope-theta applies to these only (GDN/GLA have no positional encoding; FLA's RetNet
# has its own).
ROPE_ARCHS = frozenset({"orthros", "orthros_noso", "transformer", "swa"})
