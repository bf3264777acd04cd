"""benchmarks.decode_load: the decode-under-load sweep on the CPU (tiny model), its batch list and its refusals."""
import pandas as pd
import pytest

from benchmarks import decode_load


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


def _cell(arch, context, batch, ms, predicted, attn="fa2", path="fused compiled", status="ok"):
    return dict(arch=arch, context=context, batch=batch, path=path, decode_attn=attn, decode_step_ms=ms,
                predicted_ms=predicted, measured_over_predicted=ms / predicted, status=status)


def test_step_ratios_pair_cells_and_take_each_arch_at_its_faster_kernel():
    from suite.report.decode_load import cost_limits, step_ratios

    frame = pd.DataFrame([
        _cell("transformer", 2048, 1, 5.0, 5.0), _cell("orthros", 2048, 1, 6.0, 5.5),
        _cell("transformer", 2048, 1, 4.0, 4.5, attn="matmul"), _cell("orthros", 2048, 1, 6.6, 6.0, attn="matmul"),
        _cell("transformer", 2048, 8, 8.0, 8.0), _cell("orthros", 2048, 8, 8.2, 8.0),
        _cell("orthros", 2048, 16, 9.0, 3.0),         # no transformer cell: not paired, nor in the cost model's miss
        _cell("transformer", 2048, 8, 1.0, 1.0, path="fused eager"),  # another path: left out
        _cell("transformer", 131072, 2, 10.0, 10.0, status="not run: out of memory"),
    ])
    r = step_ratios(frame).set_index(["batch", "kernel"])
    assert r.loc[(1, "fa2"), "ratio"] == pytest.approx(1.2) and r.loc[(1, "matmul"), "ratio"] == pytest.approx(1.65)
    assert r.loc[(1, "best"), "ratio"] == pytest.approx(6.0 / 4.0) and r.loc[(1, "best"), "kernels"] == "matmul/fa2"
    assert r.loc[(1, "best"), "predicted_ratio"] == pytest.approx(5.5 / 4.5)
    assert 16 not in r.index.get_level_values(0) and set(r.reset_index().context) == {2048}
    lim = cost_limits(frame).iloc[0]
    assert lim.free_batches == "8" and lim.min_ratio_batch == 8 and lim.max_ratio == pytest.approx(1.5)
    assert lim.cost_model_worst_miss == pytest.approx(1 - 4.0 / 4.5)  # the transformer's matmul cell misses most
