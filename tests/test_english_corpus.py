"""The English corpus of the pretrained arms from documentation packages (suite.data.markup, prose, doc_sources,
english): markup to prose, the language and length checks, deduplication, the per-source records and the config."""
from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest

from suite.config import ConfigError, load_config, validate
from suite.data import doc_sources, english, markup, packages, prose, shards
from tests.tiny import make_deb

PROSE = ("The quick brown fox jumps over the lazy dog, and it does so with a grace that is hard to describe. "
         "When the dog wakes up, it looks at the fox and wonders what it has been doing all this time. ")

PAGE = """<html><head><title>T</title><script>var nav = 1;</script></head><body>
<div class="related"><a href="a.html">previous</a> | <a href="b.html">next</a></div>
<div class="sphinxsidebar"><h3>Navigation</h3><ul><li>Sidebar link</li></ul></div>
<div role="main"><h1>Lists<a class="headerlink" href="#x">¶</a></h1>
<p>A list holds items in
   order; call <code>append()</code> to add one.</p>
<div class="highlight-python"><div class="highlight"><pre>xs = [1, 2]
xs.append(3)</pre></div></div>
<pre>print("also code")</pre>
<table><tr><td>cell text</td></tr></table>
<ul><li>First point.</li><li>Second point.</li></ul>
<p><b>select-stmt:</b></p>
<div style="display: none">hidden diagram</div>
</div>
<div class="footer">© Copyright footer</div></body></html>"""

POD = """=head1 NAME

perlfoo - what I<foo> does

=head1 DESCRIPTION

Sort with C<< $a <=> $b >> and read L<the manual|perlfunc>; E<lt>tagE<gt> is escaped.
A second line of the same paragraph.

    my @sorted = sort { $a <=> $b } @list;   # verbatim: code

=begin html

<p>HTML only</p>

=end html

=over 4

=item * First item

Item body.

=back

=cut

sub not_pod { 1 }
"""


def test_html_keeps_the_prose_and_drops_code_navigation_and_tables():
    text = markup.to_text(PAGE.encode(), "html")
    paragraphs = text.split("\n\n")
    assert paragraphs[:4] == ["Lists", "A list holds items in order; call append() to add one.", "First point.",
                              "Second point."]
    for gone in ("xs.append", "also code", "cell text", "Sidebar", "previous", "footer", "var nav", "¶",
                 "select-stmt", "hidden"):
        assert gone not in text, gone


def test_html_without_a_main_part_reads_the_body_less_its_navigation():
    page = (b'<html><body><div class="navheader">Prev Up Next</div><h2>Concepts</h2><p>Tables hold rows.</p>'
            b'<div class="navfooter">Home</div></body></html>')
    assert markup.to_text(page, "html") == "Concepts\n\nTables hold rows."
    assert markup.to_text(b"  ", "html") == ""


def test_pod_keeps_the_prose_and_drops_verbatim_and_other_formats():
    text = markup.to_text(POD.encode(), "pod")
    assert text.split("\n\n") == [
        "NAME", "perlfoo - what foo does", "DESCRIPTION",
        "Sort with $a <=> $b and read the manual; <tag> is escaped. A second line of the same paragraph.",
        "First item", "Item body."]
    with pytest.raises(ValueError, match="unknown markup format 'rst'"):
        markup.to_text(b"x", "rst")


def test_verdict_drops_short_and_non_english_documents():
    assert prose.verdict(PROSE * 3) is None
    assert prose.verdict(PROSE) == "short"
    german = ("Der schnelle braune Fuchs springt über den faulen Hund, und er tut dies mit einer Anmut, die schwer "
              "zu beschreiben ist. Wenn der Hund aufwacht, sieht er den Fuchs an. ") * 6
    assert prose.verdict(german) == "stopwords"
    code_words = "int main void return struct static const char size_t buffer length " * 20
    assert prose.verdict(code_words) == "stopwords"


def test_dedup_key_ignores_case_layout_and_punctuation():
    assert prose.dedup_key("Hello,  World!\n\nAgain.") == prose.dedup_key("hello world again")
    assert prose.dedup_key("hello world") != prose.dedup_key("hello there world")


def test_licence_of_a_machine_readable_copyright_file():
    dep5 = ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: demo\n\n"
            "Files: debian/*\nCopyright: 2020 Someone\nLicense: GPL-2+\n\n"
            "Files: *\nCopyright: 2020 Upstream\nLicense: MIT or Apache-2.0\n")
    assert doc_sources.licence_of(dep5) == "MIT or Apache-2.0"
    first_only = dep5.replace("Files: *\n", "Files: src/*\n       docs/*\n")
    assert doc_sources.licence_of(first_only) == "GPL-2+"
    assert doc_sources.licence_of("This package was put together by ...\nLicense:\n") is None


def test_member_choice_by_patterns_and_language_folder():
    spec = {"include": ["*.html"], "exclude": ["*/genindex.html"],
            "language": {"dir": "usr/share/doc/demo/html/", "keep": ["en"]}}
    assert doc_sources.chosen("usr/share/doc/demo/html/en/a/b.html", spec)
    assert not doc_sources.chosen("usr/share/doc/demo/html/en/genindex.html", spec)
    assert not doc_sources.chosen("usr/share/doc/demo/html/en/a.css", spec)
    assert not doc_sources.other_language("usr/share/doc/demo/html/en/a/b.html", spec)
    assert doc_sources.other_language("usr/share/doc/demo/html/de/b.html", spec)
    assert not doc_sources.other_language("usr/share/doc/demo/html/index.html", spec)  # no language folder


def _page(title: str, body: str) -> str:
    return f"<html><body><main><h1>{title}</h1><p>{body}</p><pre>code()</pre></main></body></html>"


@pytest.fixture()
def base(tmp_path):
    """A base-model folder with a byte-level tokenizer that has the document separator (the suite's own)."""
    from suite.data.tokenizer import train_tokenizer

    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "train.txt").write_text("x")
    return train_tokenizer(seed, kind="bytes", out_dir=tmp_path / "base")


def _sources(tmp_path) -> list[dict]:
    """A tiny documentation package (40 English pages, a German folder, a duplicate, a stub, an index left out
    by pattern) and a local POD file."""
    doc = "usr/share/doc/demo-doc/"
    files = {f"{doc}html/en/page{i}.html": _page(f"Page {i}", f"Topic {i}. " + PROSE * 3) for i in range(40)}
    files[f"{doc}html/en/copy.html"] = _page("Page 3", "Topic 3. " + PROSE * 3).replace("<h1>", "<h1> ")
    files[f"{doc}html/en/stub.html"] = _page("Stub", "Moved.")
    files[f"{doc}html/en/genindex.html"] = _page("Index", PROSE * 3)
    files[f"{doc}html/de/page0.html"] = _page("Seite", "Der Fuchs springt. " * 40)
    files[f"{doc}copyright"] = ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
                                "Files: *\nCopyright: 2024 Demo\nLicense: CC-BY-4.0\n")
    cache = tmp_path / "cache"
    cache.mkdir(exist_ok=True)
    deb = make_deb(cache, files, version="1:1.0-1")
    local = tmp_path / "local"
    local.mkdir()
    (local / "guide.pod").write_text("=head1 GUIDE\n\n" + PROSE * 3 + "\n\n    code();\n")
    return [{"package": "demo-doc==1:1.0-1", "kind": "deb", "sha256": packages.sha256_of(deb),
             "files": [f"{doc}html/"], "format": "html", "include": ["*.html"], "exclude": ["*/genindex.html"],
             "language": {"dir": f"{doc}html/", "keep": ["en"]}},
            {"files": [str(local / "*.pod")], "format": "pod", "licence": "CC0-1.0"}]


def test_sources_are_read_checked_deduplicated_and_recorded_per_split(tmp_path, base):
    sources = _sources(tmp_path)
    data = tmp_path / "english"
    summary = english.prepare(sources, base, data, tmp_path / "cache", val_fraction=0.2, test_fraction=0.2)
    demo, local = summary["sources"]
    assert (demo["source"], demo["version"], demo["licence"]) == ("demo-doc", "1:1.0-1", "CC-BY-4.0")
    assert demo["archive_sha256"] == sources[0]["sha256"]
    assert demo["members"] == 43 and demo["docs"] == 40  # 40 pages + copy + stub + German page (genindex excluded)
    assert [demo[f"dropped_{why}"] for why in ("language", "dup", "short", "stopwords")] == [1, 1, 1, 0]
    assert (local["source"], local["licence"], local["docs"]) == ("files", "CC0-1.0", 1)
    for split in ("train", "val", "test"):
        assert sum(row[f"tokens_{split}"] for row in summary["sources"]) == summary["tokens"][split]
        assert sum(row[f"docs_{split}"] for row in summary["sources"]) == summary["corpus"]["n_docs"][split]
    text = (data / "train.txt").read_text() + (data / "val.txt").read_text() + (data / "test.txt").read_text()
    assert "code()" not in text and "Fuchs" not in text and text.count("Topic 3.") == 1
    tokens = np.load(data / "tokens" / "train.npy")
    assert tokens.dtype == np.uint16 and tokens.size == summary["tokens"]["train"]
    rows = pd.DataFrame(english.results_rows(summary, "test"))
    from suite.provenance import PROVENANCE_COLUMNS
    from suite.report.schema import SCHEMAS, check_columns

    assert set(PROVENANCE_COLUMNS) <= set(rows.columns)
    check_columns(rows, "pretrained_corpus.csv", SCHEMAS["pretrained_corpus"])


def test_a_packed_copy_in_the_cache_is_used_instead_of_building(tmp_path, base):
    """On a host without a package index: the shards of a folder built from the same corpus and tokenizer."""
    sources = _sources(tmp_path)
    built = english.prepare(sources, base, tmp_path / "english", tmp_path / "cache", 0.2, 0.2)
    host_cache = tmp_path / "host_archives"
    shards.pack(tmp_path / "english", host_cache / "english-shards", max_mib=0.01)
    got = english.prepare(sources, base, tmp_path / "host_english", host_cache, 0.2, 0.2)  # no .deb there
    assert got == built
    for name in ("tokens/train.npy", "tokens/test.npy", "test.txt", "tokenizer/tokenizer.json"):
        assert (tmp_path / "host_english" / name).read_bytes() == (tmp_path / "english" / name).read_bytes()
    other = copy.deepcopy(sources)
    other[0]["exclude"] = []
    with pytest.raises(packages.PackageError, match="demo-doc==1:1.0-1"):  # another corpus: built, not unpacked
        english.prepare(other, base, tmp_path / "other", host_cache, 0.2, 0.2)


def test_the_single_source_form_still_reads_files_as_they_are(tmp_path, base):
    texts = tmp_path / "texts"
    texts.mkdir()
    for i in range(30):
        (texts / f"doc{i}.txt").write_text(f"Doc {i} <pre>kept as is</pre> " + PROSE)
    summary = english.prepare({"files": [str(texts / "*.txt")]}, base, tmp_path / "english", tmp_path / "cache",
                              0.2, 0.2)
    assert summary["corpus"]["archive"] == {"files": [str(texts / "*.txt")]}
    (row,) = summary["sources"]
    assert row["docs"] == 30 and row["dropped_short"] == 0 and "<pre>" in (tmp_path / "english/train.txt").read_text()


def _with_corpus(corpus) -> dict:
    cfg = copy.deepcopy(load_config("gpu"))
    cfg["conversion"]["pretrained"]["corpus"] = corpus
    return cfg


def test_config_names_an_unknown_key_a_bad_format_and_a_package_without_sha256():
    source = copy.deepcopy(load_config("gpu")["conversion"]["pretrained"]["corpus"][0])
    with pytest.raises(ConfigError, match=r"corpus\.0\.formt: unknown key"):
        validate(_with_corpus([{**source, "formt": "html"}]), "demo.yaml")
    with pytest.raises(ConfigError, match=r"corpus\.0\.format: 'rst' is not one of"):
        validate(_with_corpus([{**source, "format": "rst"}]), "demo.yaml")
    with pytest.raises(ConfigError, match=r"corpus\.0: 'sha256' is a dependency of 'package'"):
        validate(_with_corpus([{k: v for k, v in source.items() if k != "sha256"}]), "demo.yaml")
    with pytest.raises(ConfigError, match=r"corpus\.0\.language: 'keep' is a required property"):
        validate(_with_corpus([{**source, "language": {"dir": "x/"}}]), "demo.yaml")
    with pytest.raises(ConfigError, match=r"corpus\.format: unknown key"):  # the one-source form takes no format
        validate(_with_corpus({k: source[k] for k in ("package", "kind", "sha256", "files")} | {"format": "html"}),
                 "demo.yaml")
    with pytest.raises(ConfigError, match="demo.yaml"):
        validate(_with_corpus([]), "demo.yaml")
    assert validate(_with_corpus({"files": ["/data/*.txt"]}), "demo.yaml")


def test_local_sources_are_the_english_rules_inputs(tmp_path):
    from suite.workflow_helpers import path_inputs

    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "b.pod").write_text("y")
    cfg = _with_corpus([{"files": [str(tmp_path / "*.txt")]}, {"files": [str(tmp_path / "*.pod")], "format": "pod"},
                        load_config("gpu")["conversion"]["pretrained"]["corpus"][0]])
    assert path_inputs(cfg)["english_data"] == [str(tmp_path / "a.txt"), str(tmp_path / "b.pod")]
    assert path_inputs(load_config("gpu"))["english_data"] == []


def test_the_gpu_profile_names_debian_packages_by_version_and_sha256():
    corpus = load_config("gpu")["conversion"]["pretrained"]["corpus"]
    assert len(corpus) >= 7 and all(s["kind"] == "deb" and len(s["sha256"]) == 64 for s in corpus)
    names = [packages.parse_pin(s["package"])[0] for s in corpus]
    assert len(set(names)) == len(names) and "python3.11-doc" in names
    assert json.dumps(load_config("default")["conversion"]["pretrained"]["corpus"]).startswith('{"package"')
