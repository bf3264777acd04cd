"""A prepared data folder packed into checked shards and unpacked on another host (suite.data.shards)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from suite.data import shards


def _folder(root):
    """A data folder as suite.data.english writes one: token arrays, tokenizer, records, texts and raw/."""
    rng = np.random.default_rng(0)
    (root / "tokens").mkdir(parents=True)
    (root / "tokenizer").mkdir()
    (root / "raw" / "usr").mkdir(parents=True)
    for split, n in (("train", 60_000), ("val", 3_000), ("test", 3_000)):
        np.save(root / "tokens" / f"{split}.npy", rng.integers(0, 49152, n, dtype=np.uint16))
        (root / f"{split}.txt").write_text(f"{split} text " * 100)
    (root / "tokens" / "meta.json").write_text("{}")
    (root / "tokenizer" / "tokenizer.json").write_text('{"model": {}}')
    (root / "corpus.json").write_text('{"sha256": "x"}')
    (root / "english.json").write_text(json.dumps({"key": {"corpus": [1], "vocab_sha256": "y"}}))
    (root / "raw" / "usr" / "page.html").write_text("<p>unpacked archive</p>")
    return root


def test_round_trip_in_shards_no_larger_than_asked(tmp_path):
    data = _folder(tmp_path / "data")
    manifest = shards.pack(data, tmp_path / "shards", max_mib=0.03)
    assert len(manifest["shards"]) > 1 and all(s["bytes"] <= 0.03 * 2**20 for s in manifest["shards"])
    assert manifest["about"] == {"english": {"corpus": [1], "vocab_sha256": "y"}}
    packed = [f["path"] for f in manifest["files"]]
    assert "train.txt" not in packed and not any(p.startswith("raw/") for p in packed)
    shards.unpack(tmp_path / "shards", tmp_path / "host")
    for rel in packed:
        assert (tmp_path / "host" / rel).read_bytes() == (data / rel).read_bytes()
    assert np.load(tmp_path / "host" / "tokens" / "train.npy").dtype == np.uint16
    assert shards.find(tmp_path, manifest["about"]) == tmp_path / "shards"
    assert shards.find(tmp_path, {"english": {}}) is None
    with pytest.raises(shards.ShardError, match="already holds shards"):
        shards.pack(data, tmp_path / "shards")


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_a_damaged_shard_is_refused_by_name_before_anything_is_written(tmp_path, damage):
    manifest = shards.pack(_folder(tmp_path / "data"), tmp_path / "shards", max_mib=0.03)
    name = manifest["shards"][1]["name"]
    if damage == "missing":
        (tmp_path / "shards" / name).unlink()
    else:
        blob = bytearray((tmp_path / "shards" / name).read_bytes())
        blob[100] ^= 0xFF
        (tmp_path / "shards" / name).write_bytes(bytes(blob))
    with pytest.raises(shards.ShardError, match=f"{name} is {damage}"):
        shards.unpack(tmp_path / "shards", tmp_path / "host")
    assert not (tmp_path / "host").exists()


def test_the_command_line_packs_verifies_and_unpacks(tmp_path, capsys):
    data = _folder(tmp_path / "data")
    shards.main(["pack", str(data), str(tmp_path / "shards"), "--max-mib", "0.05"])
    packed = json.loads(capsys.readouterr().out)
    assert packed["shards"] >= 2 and packed["files"] == 9
    shards.main(["verify", str(tmp_path / "shards")])
    shards.main(["unpack", str(tmp_path / "shards"), str(tmp_path / "host")])
    assert (tmp_path / "host" / "tokens" / "val.npy").read_bytes() == (data / "tokens" / "val.npy").read_bytes()
    (tmp_path / "shards" / "manifest.json").unlink()
    with pytest.raises(SystemExit, match="manifest.json not found"):
        shards.main(["unpack", str(tmp_path / "shards"), str(tmp_path / "host")])
