"""Multi-query associative recall (Table 3's proxy; README.md)."""
