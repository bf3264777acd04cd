"""From scratch at one size, tuned, at equal tokens and equal GPU time (Tables 1 and 3 at 25M; README.md)."""
