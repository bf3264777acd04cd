"""suite.bench.decode_load: the decode-under-load sweep on the CPU (tiny model), its batch list and its refusals."""
import pandas as pd
import pytest

from suite.bench import decode_load


def test_auto_batches_are_powers_of_two_then_the_largest_that_fits():
    assert decode_load.auto_batches(6, 512) == [1, 2, 4, 6]
    assert decode_load.auto_batches(8, 512) == [1, 2, 4, 8]
    assert decode_load.auto_batches(1000, 300) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300]
    assert decode_load.auto_batches(0, 512) == []


def test_sweep_writes_a_predicted_and_measured_row_per_cell(tmp_path):
    rows = decode_load.main(["--device", "cpu", "--dtype", "float32", "--size", "1M", "--contexts", "40,70",
                             "--batches", "1,3", "--steps", "2", "--repeats", "1", "--paths", "eager",
                             "--decode-attn", "matmul,fa2", "--phases", "--out-dir", str(tmp_path)])
    frame = pd.read_csv(tmp_path / "decode_load.csv")
    assert len(rows) == len(frame) == 2 * 2 * 2 * 2  # contexts x batches x archs x decode attention kernels
    assert (frame.status == "ok").all() and set(frame.path) == {"fused eager"}
    assert set(frame.decode_attn) == {"fa2", "matmul"}
    assert (frame.gemm_alone_ms > 0).all() and (frame.attn_alone_ms > 0).all()
    assert (frame.gemm_rows == frame.batch * frame.arch.map({"orthros": 2, "transformer": 1})).all()
    for r in frame.itertuples():
        assert r.predicted_ms == pytest.approx(r.gemm_ms + r.attn_ms + r.overhead_ms)
        assert r.measured_over_predicted == pytest.approx(r.decode_step_ms / r.predicted_ms)
        assert r.tok_s == pytest.approx(1e3 * r.batch / r.decode_step_ms)
        assert r.kernels_per_step > 0
        assert r.window == 128 if r.arch == "orthros" else pd.isna(r.window)
    targets = pd.read_csv(tmp_path / "targets.csv")
    assert set(targets.arch) == {"orthros", "transformer"} and set(targets.status) <= {"pass", "fail"}
    assert len(targets) == 4  # per arch and decode attention kernel


@pytest.mark.parametrize("argv, needle", [(["--archs", "gdn"], "cost model knows"),
                                          (["--batches", "1,x"], "batch sizes"),
                                          (["--contexts", "0"], "contexts"),
                                          (["--paths", "jit"], "--paths"),
                                          (["--decode-attn", "flash"], "--decode-attn")])
def test_bad_options_name_themselves(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        decode_load.main(["--device", "cpu", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle.split()[0] in err or "--contexts" in err, err
