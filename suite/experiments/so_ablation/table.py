"""The SO ablation's table (Table 7: scaling and the query scale-offset): what is its own. The rows are every LM
table's (:func:`suite.report.tables.lm_table`): the paper's cells beside the profile's measured rows of
``ablation.csv``, each matched on arch, task and size, then the gpu profile's measured-only rows; the render assembles
them (:mod:`suite.render`)."""
from __future__ import annotations

TABLE = "Table 7"      # the paper's rows (paper_tables/reported/) and conditions
RESULTS = "ablation"   # results/<profile>/ablation.csv and results/gpu/ablation.csv
MATCH_SCALE = True     # a measured cell matches the paper's on its size too (the ablation's sizes)
TITLE = "Table 7: scaling and scale-offset ablation"
NOTE = ("10B tokens per model (NOT the 100B run of Table 1); averages are over 6 tasks (no SIQA). The suite's "
        "ablation sizes are far below 160M: its accuracies are measured-only rows (zero-shot, n, stderr, "
        "chance, split as in Table 1). Per-task cells "
        "exist only for 160M, 1.3B and 6.8B. Rows whose scale ends in '(gpu profile)' come from "
        "results/gpu/ablation.csv (one H200; gated by its own controls; the SO verdict: claims_audit C12).")
