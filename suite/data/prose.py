"""Document checks of English prose: enough words, English by its stopwords, and a key for exact duplicates.

English by stopwords: in running English text the most frequent function words ("the", "of", "and", "to", ...) make
up about 40% of the words; in another language, a list of names or a page of code far fewer. A document whose share
of ``STOPWORDS`` among its words is below ``MIN_STOPWORD_SHARE`` is not English prose. The threshold sits well below
English documentation pages (0.3-0.45) and above translated pages (which keep English only in names and code: < 0.1).
"""
from __future__ import annotations

import hashlib
import re

MIN_WORDS = 100  # a page with fewer words after markup stripping is a stub, an index or a redirect
MIN_STOPWORD_SHARE = 0.2
STOPWORDS = frozenset("""
a about after all also an and any are as at be because been but by can could do does each for from had has have he
her his how if in into is it its may more most must no not of on one only or other our out she should so some such
than that the their them then there these they this those through to under up was we were what when where which
while who will with would you your
""".split())
WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def words(text: str) -> list[str]:
    """The words of ``text`` (letters, with an inner apostrophe), lower-cased."""
    return WORD.findall(text.lower())


def verdict(text: str) -> str | None:
    """None for an English prose document; else why not: ``short`` (fewer than ``MIN_WORDS`` words) or ``stopwords``
    (stopword share below ``MIN_STOPWORD_SHARE``: another language, or a page of names and code)."""
    found = words(text)
    if len(found) < MIN_WORDS:
        return "short"
    if sum(w in STOPWORDS for w in found) / len(found) < MIN_STOPWORD_SHARE:
        return "stopwords"
    return None


def dedup_key(text: str) -> bytes:
    """The sha256 of ``text`` lower-cased, with every run of whitespace and punctuation one space: two documents
    with the same key are the same text in other layout."""
    return hashlib.sha256(" ".join(re.findall(r"\w+", text.lower())).encode("utf-8")).digest()
