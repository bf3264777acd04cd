"""Needle in a haystack (Fig. 3; README.md)."""
