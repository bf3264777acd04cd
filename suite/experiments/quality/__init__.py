"""The LM comparison of the six architectures (Table 1; README.md)."""
