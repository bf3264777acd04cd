"""suite.collect: 'not run' rows for archs a profile leaves out."""
import pandas as pd

from suite.collect import concat


def test_not_run_rows_cover_every_cell_and_carry_the_shared_provenance(tmp_path):
    rows = [{"arch": "transformer", "context_len": n, "depth": d, "accuracy": 1.0, "status": "ok", "commit": "abc",
             "profile": "gpu", "device": "NVIDIA H200", "dtype": "bfloat16", "backend": "sdpa-flash"}
            for n in (4096, 8192) for d in (0.0, 1.0)]
    pd.DataFrame(rows).to_csv(tmp_path / "t.csv", index=False)
    out = concat([str(tmp_path / "t.csv")], {"gdn": "not run: cut by the cap"})
    gdn = out[out["arch"] == "gdn"]
    assert len(gdn) == 4 and set(zip(gdn["context_len"], gdn["depth"])) == {(4096, 0.0), (4096, 1.0), (8192, 0.0),
                                                                           (8192, 1.0)}
    assert (gdn["status"] == "not run: cut by the cap").all() and gdn["accuracy"].isna().all()
    assert (gdn[["commit", "profile", "device", "dtype"]].values == ["abc", "gpu", "NVIDIA H200", "bfloat16"]).all()
    assert gdn["backend"].isna().all()  # no kernel ran for it
