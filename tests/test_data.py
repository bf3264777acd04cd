"""Corpus split, tokenizer, retrieval sequences and batches, on a small stdlib subset."""
import hashlib
import itertools
import json
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from suite.data import corpus as corpus_mod
from suite.data.batches import TokenBatches, eval_windows
from suite.data.corpus import SourceUnavailableError, build_corpus
from suite.data.retrieval import ANSWER_TEMPLATE, NEEDLE_TEMPLATE, QUESTION_TEMPLATE, RetrievalSampler
from suite.data.splits import DOC_SEPARATOR, read_split
from suite.data.tokenizer import encode_splits, load_tokenizer, load_tokens, prepare, train_tokenizer

N_FILES, FRACTIONS = 30, dict(val_fraction=0.2, test_fraction=0.2)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    build_corpus(d, "stdlib", max_files=N_FILES, **FRACTIONS)
    prepare(d, "bpe", 512)
    return d


def _expected_split(name):  # independent re-derivation of the documented rule
    u = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") / 2**64
    return "val" if u < 0.2 else "test" if u < 0.4 else "train"


def test_split_is_deterministic_and_disjoint_by_file(data_dir, tmp_path):
    meta = json.loads((data_dir / "corpus.json").read_text())
    names = {s: meta["docs"][s] for s in ("train", "val", "test")}
    all_names = [n for s in names.values() for n in s]
    nonempty = [n for n, text in corpus_mod.stdlib_documents(max_files=N_FILES) if text.strip()]
    assert len(all_names) == len(set(all_names)) and sorted(all_names) == sorted(nonempty)
    assert all(names[s] for s in names), "every split holds at least one file"
    for split, members in names.items():
        assert all(_expected_split(n) == split for n in members)
    root = Path(sysconfig.get_paths()["stdlib"])
    for split, members in names.items():
        docs = read_split(data_dir, split)
        assert len(docs) == len(members)
        assert docs[0] == (root / members[0]).read_text(encoding="utf-8", errors="replace")
    again = tmp_path / "again"
    meta2 = build_corpus(again, "stdlib", max_files=N_FILES, **FRACTIONS)
    assert meta2["sha256"] == meta["sha256"]
    for split in names:
        assert (again / f"{split}.txt").read_bytes() == (data_dir / f"{split}.txt").read_bytes()


def test_stdlib_excludes_tests_and_caches():
    names = [n for n, _ in corpus_mod.stdlib_documents()]
    assert len(names) > 300
    bad = [n for n in names if {"test", "tests", "idle_test", "site-packages", "__pycache__"} & set(n.split("/")[:-1])]
    assert not bad
    assert "os.py" in names and "json/decoder.py" in names


def test_tokenizer_round_trip_and_autotokenizer(data_dir):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(data_dir / "tokenizer"))
    assert len(hf) == 512
    ids = {hf.bos_token, hf.eos_token, hf.pad_token, hf.unk_token}
    assert ids == {"<|bos|>", "<|endoftext|>", "<|pad|>", "<|unk|>"}
    text = "def f(x):\n\treturn x ** 2  # ünïcode ✓ 中文 \r\n  trailing  "
    enc = hf.encode(text, add_special_tokens=False)
    assert hf.decode(enc) == text
    assert len(enc) < len(text.encode()), "BPE merges compress below one token per byte"


def test_bytes_tokenizer(data_dir, tmp_path):
    out = train_tokenizer(data_dir, "bytes", out_dir=tmp_path / "bytes_tok")
    tok = load_tokenizer(out)
    assert tok.get_vocab_size() == 260
    text = "naïve £ 🙂"
    assert len(tok.encode(text).ids) == len(text.encode())
    assert tok.decode(tok.encode(text).ids) == text
    with pytest.raises(ValueError, match="unknown tokenizer kind 'words'"):
        train_tokenizer(data_dir, "words")


def test_tokenizer_is_trained_again_without_its_files_or_after_a_corpus_change(data_dir, tmp_path):
    """The reuse check needs the tokenizer files (Snakemake deletes a rerun job's outputs, tokenizer.json among them,
    but not the undeclared ones such as the stamp) and the corpus the tokenizer was trained on."""
    import shutil

    d = tmp_path / "data"
    shutil.copytree(data_dir, d)
    before = (d / "tokenizer" / "tokenizer.json").read_bytes()
    for path in [d / "tokenizer" / "tokenizer.json", *(d / "tokens").glob("*.npy")]:
        path.unlink()
    prepare(d, "bpe", 512)
    assert (d / "tokenizer" / "tokenizer.json").read_bytes() == before
    assert len(load_tokens(d, "train")) > 0
    stamp = d / "tokenizer" / "suite_tokenizer.json"
    corpus_sha = json.loads((d / "corpus.json").read_text())["sha256"]
    assert json.loads(stamp.read_text()) == {"kind": "bpe", "vocab_size": 512, "corpus_sha256": corpus_sha}

    build_corpus(d, "stdlib", max_files=N_FILES + 10, overwrite=True, **FRACTIONS)
    new_sha = json.loads((d / "corpus.json").read_text())["sha256"]
    assert new_sha != corpus_sha
    prepare(d, "bpe", 512)
    assert json.loads(stamp.read_text())["corpus_sha256"] == new_sha
    assert (d / "tokenizer" / "tokenizer.json").read_bytes() != before


def test_encoded_split_matches_text_and_is_cached(data_dir):
    tok = load_tokenizer(data_dir / "tokenizer")
    eos = tok.token_to_id("<|endoftext|>")
    val = load_tokens(data_dir, "val")
    docs = read_split(data_dir, "val")
    assert val.dtype == np.uint16 and int((val == eos).sum()) == len(docs)
    assert val[-1] == eos
    pieces = np.split(np.asarray(val), np.flatnonzero(val == eos) + 1)[:-1]
    assert tok.decode(pieces[0][:-1].tolist()) == docs[0]
    mtime = (data_dir / "tokens" / "val.npy").stat().st_mtime_ns
    encode_splits(data_dir)
    assert (data_dir / "tokens" / "val.npy").stat().st_mtime_ns == mtime


def test_retrieval_sequence(data_dir):
    tok = load_tokenizer(data_dir / "tokenizer")
    train = load_tokens(data_dir, "train")
    sampler = RetrievalSampler.from_tokenizer_dir(train, data_dir / "tokenizer", max_keys=3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        seq = sampler.sample(rng, 256)
        assert seq.shape == (256,) and seq.dtype == np.int64
        text = tok.decode(seq.tolist())
        question_head = QUESTION_TEMPLATE.split("{key}")[0]
        assert text.count(question_head) == 1
        key = text.split(question_head)[1].split(" mentioned")[0]
        answer = text.rsplit("is ", 1)[1].rstrip(".")
        assert answer.isdigit() and len(answer) == 7
        assert NEEDLE_TEMPLATE.format(key=key, value=answer) in text
        assert text.endswith(QUESTION_TEMPLATE.format(key=key) + ANSWER_TEMPLATE.format(value=answer))
    with pytest.raises(ValueError, match="seq_len 20 too short"):
        sampler.sample(rng, 20)


def test_batches_deterministic_and_resumable(data_dir):
    train = load_tokens(data_dir, "train")
    a = TokenBatches(train, 4, 32, seed=7)
    first = [b.clone() for b in itertools.islice(a, 6)]
    assert all(b.shape == (4, 32) and b.dtype == torch.int64 for b in first)
    resumed = TokenBatches(train, 4, 32, seed=7, start_step=3)
    assert all(torch.equal(b, first[3 + i]) for i, b in enumerate(itertools.islice(resumed, 3)))
    assert a.state_dict() == {"step": 6, "seed": 7}
    assert not torch.equal(TokenBatches(train, 4, 32, seed=8).batch(0), first[0])
    windows = np.lib.stride_tricks.sliding_window_view(np.asarray(train, dtype=np.int64), 32)
    assert all((windows == row.numpy()).all(axis=1).any() for row in first[0]), "rows are crops of the train array"


def test_retrieval_fraction_in_batches(data_dir):
    train = load_tokens(data_dir, "train")
    tok = load_tokenizer(data_dir / "tokenizer")
    sampler = RetrievalSampler.from_tokenizer_dir(train, data_dir / "tokenizer", max_keys=2)
    batches = TokenBatches(train, 4, 192, seed=1, retrieval=sampler, retrieval_fraction=0.5)
    for step in range(3):
        texts = [tok.decode(r.tolist()) for r in batches.batch(step)]
        assert sum("What is the special magic number" in t for t in texts) == 2
    with pytest.raises(ValueError, match="retrieval_fraction 1.5"):
        TokenBatches(train, 4, 64, seed=1, retrieval=sampler, retrieval_fraction=1.5)


def test_eval_windows_fixed(data_dir):
    val = load_tokens(data_dir, "val")
    w1, w2 = eval_windows(val, 2, 16, 3), eval_windows(val, 2, 16, 3)
    assert len(w1) == 3 and all(torch.equal(a, b) for a, b in zip(w1, w2))
    assert torch.equal(w1[0][0], torch.from_numpy(np.asarray(val[:16], dtype=np.int64)))


def test_hf_source_fails_fast_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(SourceUnavailableError, match="HuggingFaceFW/fineweb-edu"):
        build_corpus(tmp_path, "hf", hf={"path": "HuggingFaceFW/fineweb-edu", "name": "sample-10BT", "n_docs": 10})
    assert time.perf_counter() - t0 < 5
    assert not (tmp_path / "train.txt").exists()


def test_file_sources(tmp_path):
    (tmp_path / "a.txt").write_text("alpha text")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "beta"}) + "\n" + json.dumps({"text": "gamma"}) + "\n")
    docs = dict(corpus_mod.file_documents([str(tmp_path / "*.txt"), str(tmp_path / "*.jsonl")]))
    assert sorted(docs.values()) == ["alpha text", "beta", "gamma"]
    (tmp_path / "c.jsonl").write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"c\.jsonl line 1: no field 'text'"):
        list(corpus_mod.file_documents([str(tmp_path / "c.jsonl")]))
    with pytest.raises(ValueError, match="no file matches"):
        list(corpus_mod.file_documents([str(tmp_path / "*.parquet")]))
    with pytest.raises(ValueError, match="unknown data source 'ftp'"):
        build_corpus(tmp_path / "d", "ftp")


def test_file_corpus_split_does_not_depend_on_where_the_files_lie(tmp_path, monkeypatch):
    """A local file's document name (and so its split) is its path below the globs' root: the same files copied
    elsewhere, or named by an absolute, relative or ``./`` glob, give the same corpus."""
    for folder in ("one/texts", "two/deeper/texts"):
        (tmp_path / folder / "sub").mkdir(parents=True)
        for i in range(40):
            (tmp_path / folder / ("sub" if i % 3 else "") / f"d{i}.txt").write_text(f"document {i} " * 20)
    monkeypatch.chdir(tmp_path)
    metas = [build_corpus(tmp_path / f"out{k}", "files", files=[glob], val_fraction=0.2, test_fraction=0.2)
             for k, glob in enumerate([str(tmp_path / "one/texts/**/*.txt"), "two/deeper/texts/**/*.txt",
                                       "./one/texts/**/*.txt"])]
    assert metas[0]["docs"]["val"] and "sub/d1.txt" in sum(metas[0]["docs"].values(), [])
    assert metas[0]["docs"] == metas[1]["docs"] == metas[2]["docs"]
    assert metas[0]["sha256"] == metas[1]["sha256"]


def test_separator_never_inside_documents(data_dir):
    for split in ("train", "val", "test"):
        assert all(DOC_SEPARATOR not in d for d in read_split(data_dir, split))


def _text_files(folder, n):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"doc{i:02d}.txt").write_text(f"document {i}: plain UTF-8 text, naïve café ✓\n" * 10)


def test_undecodable_files_are_skipped_and_named(tmp_path):
    """A binary file and a Latin-1 text among 30 good files: skipped with a warning naming both and the count;
    no U+FFFD reaches the splits, and corpus.json lists what was skipped and why."""
    src = tmp_path / "src"
    _text_files(src, 30)
    (src / "blob.txt").write_bytes(bytes(range(256)))
    (src / "latin1.txt").write_bytes("caf\xe9 cr\xe8me br\xfbl\xe9e\n".encode("latin-1"))
    with pytest.warns(UserWarning, match=r"skipped 2 of 32 files") as record:
        meta = build_corpus(tmp_path / "out", "files", files=[str(src / "*.txt")], **FRACTIONS)
    message = str(record[0].message)
    assert "blob.txt (contains NUL bytes)" in message and "latin1.txt (not valid UTF-8" in message
    assert sum(meta["n_docs"].values()) == 30
    assert {Path(s["name"]).name for s in meta["skipped"]} == {"blob.txt", "latin1.txt"}
    for split in ("train", "val", "test"):
        assert "\ufffd" not in (tmp_path / "out" / f"{split}.txt").read_text(encoding="utf-8")


def test_mostly_undecodable_corpus_is_refused(tmp_path):
    src = tmp_path / "src"
    _text_files(src, 8)
    (src / "blob.txt").write_bytes(bytes(range(256)) * 4)
    (src / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"2 of 10 files .*blob\.txt.*latin1\.txt.*more than 10%"):
        build_corpus(tmp_path / "out", "files", files=[str(src / "*.txt")], **FRACTIONS)
    assert not (tmp_path / "out" / "train.txt").exists()


def test_bad_jsonl_and_stdlib_files_are_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl: not valid UTF-8"):
        list(corpus_mod.file_documents([str(bad)]))
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"text": "fine"}) + "\n{\"text\": \"cut sho\n")
    with pytest.raises(ValueError, match=r"broken\.jsonl line 2: not JSON"):
        list(corpus_mod.file_documents([str(broken)]))
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "ok.py").write_text("x = 1\n")
    (lib / "old.py").write_bytes(b"# -*- coding: latin-1 -*-\ns = '\xe9'\n")
    with pytest.raises(ValueError, match=r"old\.py: not valid UTF-8"):
        list(corpus_mod.stdlib_documents(root=lib))


def test_site_packages_source_reads_installed_code_once():
    """The GPU profiles' larger offline corpus: installed packages' sources, vendored duplicates kept once."""
    docs = list(corpus_mod.site_packages_documents(max_files=300))
    assert len(docs) > 100 and all(name.endswith(".py") for name, _ in docs)
    texts = [text for _, text in docs]
    assert len(set(texts)) == len(texts)
    assert not any({"tests", "__pycache__"} & set(name.split("/")[:-1]) for name, _ in docs)


def test_packages_source_reads_pinned_archives_the_same_everywhere(tmp_path):
    """Source 'packages' (the gpu profile's): pinned archives' code, checked and deduplicated, a salted subset;
    the settings that built it recorded for reuse; an archive that cannot be fetched is named."""
    from suite.data import packages
    from tests.tiny import make_deb

    code = "def f{i}(x):\n    y = x + {i}\n    z = y * 2\n    w = z - 1\n    return w\n"
    lib = "usr/lib/python3/dist-packages/demo/"
    files = {f"{lib}mod{i}.py": code.format(i=i) for i in range(40)} | {f"{lib}tiny.py": "pass\n",
                                                                      f"{lib}dup.py": code.format(i=0)}
    (tmp_path / "cache").mkdir()
    deb = make_deb(tmp_path / "cache", files, name="python3-demo", version="1.0-1")
    spec = {"package": "python3-demo==1.0-1", "kind": "deb", "sha256": packages.sha256_of(deb), "files": ["usr/"],
            "include": ["*.py"], "check": "code"}
    docs = corpus_mod.package_documents([spec], tmp_path / "cache")
    assert len(docs) == 40 and all(name.startswith("python3-demo:usr/") for name, _ in docs)  # short and copy out
    subset = corpus_mod.package_documents([spec], tmp_path / "cache", max_files=10)
    assert len(subset) == 10 and subset == [d for d in docs if d in subset]  # a subset, in archive order
    meta = corpus_mod.build_corpus(tmp_path / "data", source="packages", packages=[spec], cache=tmp_path / "cache",
                                   val_fraction=0.2, test_fraction=0.2)
    assert meta["settings"]["packages"] == [spec] and sum(meta["n_docs"].values()) == 40
    again = corpus_mod.build_corpus(tmp_path / "data", source="packages", packages=[spec], cache=tmp_path / "none",
                                    val_fraction=0.2, test_fraction=0.2)  # same settings: reused, nothing fetched
    assert again["sha256"] == meta["sha256"]
    with pytest.raises(ValueError, match="data.packages"):
        list(corpus_mod.documents("packages", cache=tmp_path))
    wrong = {**spec, "sha256": "0" * 64}
    with pytest.raises(packages.PackageError, match="python3-demo==1.0-1"):
        corpus_mod.package_documents([wrong], tmp_path / "cache")


def test_epoch_order_reads_every_window_once_an_epoch():
    """order 'epoch': non-overlapping windows of seq_len, each read once before any is read again, in a seeded order
    that is a pure function of (seed, step); each epoch its own order and cut."""
    train = np.arange(32 * 161)  # a token's id is its position, so a row's first id is its window's start
    batches = TokenBatches(train, 4, 32, seed=7, order="epoch")
    n = batches.n_windows
    assert n == 160
    starts = [[int(row[0]) for step in range(e * 40, (e + 1) * 40) for row in batches.batch(step)] for e in range(2)]
    for epoch in starts:
        assert len(set(epoch)) == len(epoch) == n
        assert len({s % 32 for s in epoch}) == 1, "one cut offset an epoch"
    assert starts[0] != starts[1]
    assert all(torch.equal(r[1:] - r[:-1], torch.ones(31, dtype=torch.int64)) for r in batches.batch(3))
    assert batches.epochs(40) == 1.0 and batches.epochs(60) == 1.5
    assert torch.equal(TokenBatches(train, 4, 32, seed=7, order="epoch").batch(9), batches.batch(9))
    assert not torch.equal(TokenBatches(train, 4, 32, seed=8, order="epoch").batch(0), batches.batch(0))
    with pytest.raises(ValueError, match="takes no retrieval rows"):
        TokenBatches(train, 4, 32, seed=7, order="epoch", retrieval=object(), retrieval_fraction=0.5)
    with pytest.raises(ValueError, match="order 'sorted' not in"):
        TokenBatches(train, 4, 32, seed=7, order="sorted")
