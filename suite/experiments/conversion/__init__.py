"""The conversion experiment: a trained Transformer converted to Orthros and continued, against continuing it
unchanged (Table 2; README.md)."""
