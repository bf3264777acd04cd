"""The query scale-offset ablation (Table 7, Fig. 2; README.md)."""
