"""MQAR generator, accuracy, train-then-evaluate loop and grid (suite.experiments.mqar.data, mqar_eval, mqar_train,
mqar_grid) and its command line (suite.experiments.mqar.run)."""
from functools import partial

import numpy as np
import pytest
import torch

from models.registry import build
from suite.experiments.mqar.data import mqar_data, query_distances
from suite.experiments.mqar.eval import mqar_accuracy
from suite.experiments.mqar.grid import MQAR_COLUMNS, run_grid
from suite.experiments.mqar.train import llama_factory
from suite.provenance import PROVENANCE_COLUMNS


def test_generator_layout_matches_recipe():
    vocab, seq_len, kv = 128, 64, 8
    x, y = mqar_data(vocab, seq_len, kv, num_examples=50, seed=3)
    assert x.shape == y.shape == (50, seq_len) and x.dtype == y.dtype == torch.int64
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        keys, values = row_x[0:2 * kv:2], row_x[1:2 * kv:2]
        assert all(1 <= k < vocab // 2 for k in keys) and len(set(keys)) == kv
        assert all(vocab // 2 <= v < vocab for v in values)
        answer_pos = [t for t, lab in enumerate(row_y) if lab != -100]
        assert len(answer_pos) == kv                      # every key queried exactly once
        assert sorted(row_x[t] for t in answer_pos) == sorted(keys)
        pair = dict(zip(keys, values))
        for t in answer_pos:
            assert t >= 2 * kv and (t - 2 * kv) % 2 == 0
            assert row_y[t] == pair[row_x[t]]             # label at the query = value paired in the context
    x2, y2 = mqar_data(vocab, seq_len, kv, num_examples=50, seed=3)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert not torch.equal(x, mqar_data(vocab, seq_len, kv, num_examples=50, seed=4)[0])


def test_power_law_puts_queries_early():
    def mean_offset(power_a):
        _, y = mqar_data(256, 128, 4, num_examples=400, seed=0, power_a=power_a)
        pos = (y != -100).nonzero()[:, 1].float()
        return float((pos - 8).mean())
    uniform = mean_offset(1.0)
    assert abs(uniform - 59) < 5                          # uniform gap in 0..59 -> mean offset 2 * 29.5
    assert mean_offset(0.01) < 0.75 * uniform


@pytest.mark.parametrize("kwargs", [dict(seq_len=63), dict(num_kv_pairs=17), dict(vocab_size=16, num_kv_pairs=8),
                                    dict(power_a=0.0)])
def test_bad_arguments_raise(kwargs):
    args = dict(vocab_size=128, seq_len=64, num_kv_pairs=4, num_examples=2, seed=0) | kwargs
    with pytest.raises(ValueError):
        mqar_data(**args)


def test_shared_slots_share_query_positions_only():
    x, y = mqar_data(128, 64, 4, num_examples=20, seed=5, shared_slots=True)
    slots = [(row != -100).nonzero().flatten().tolist() for row in y]
    assert all(s == slots[0] for s in slots) and len(slots[0]) == 4
    assert len({tuple(row[:8].tolist()) for row in x}) == 20          # keys/values still differ per row
    assert len({tuple(row[slots[0]].tolist()) for row in y}) > 1        # so do the answers at the slots


def test_query_distances_match_a_naive_loop():
    x, y = mqar_data(64, 48, 6, num_examples=10, seed=2)
    want = []
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        for t, lab in enumerate(row_y):
            if lab != -100:
                want.append(t - (row_x[:12].index(row_x[t]) + 1))     # value sits right after its key
    assert query_distances(x, y, 6).tolist() == want


class LookupOracle(torch.nn.Module):
    """Reads the context like a perfect recall model: at a key, predict the value stored after it. With ``reach``,
    it sees only values at most ``reach`` tokens back (a sliding-window model) and otherwise guesses a fixed value."""

    def __init__(self, vocab, kv, wrong=False, reach=None):
        super().__init__()
        self.vocab, self.kv, self.wrong, self.reach = vocab, kv, wrong, reach
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids):
        logits = torch.zeros(*input_ids.shape, self.vocab)
        for b, row in enumerate(input_ids.tolist()):
            keys = row[0:2 * self.kv:2]
            pair = dict(zip(keys, row[1:2 * self.kv:2]))
            for t, tok in enumerate(row):
                if t >= 2 * self.kv and tok in pair:
                    seen = self.reach is None or t - (2 * keys.index(tok) + 1) <= self.reach
                    logits[b, t, pair[tok] if seen and not self.wrong else self.vocab // 2] = 1.0
        return logits


def test_accuracy_counts_only_answer_positions():
    vocab, kv = 64, 4
    x, y = mqar_data(vocab, 32, kv, num_examples=30, seed=1)
    assert mqar_accuracy(LookupOracle(vocab, kv), x, y, kv, batch_size=7)["accuracy"] == 1.0
    expected_wrong = float((y[y != -100] == vocab // 2).float().mean())
    assert mqar_accuracy(LookupOracle(vocab, kv, wrong=True), x, y, kv)["accuracy"] == pytest.approx(expected_wrong)


def test_near_far_split_separates_a_windowed_reader():
    vocab, kv, reach = 128, 4, 6
    x, y = mqar_data(vocab, 64, kv, num_examples=60, seed=4, power_a=1.0)
    out = mqar_accuracy(LookupOracle(vocab, kv, reach=reach), x, y, kv, far_distance=reach, batch_size=16)
    dist = query_distances(x, y, kv)
    assert out["n_near"] == int((dist <= reach).sum()) and out["n_far"] == int((dist > reach).sum())
    assert out["accuracy_near"] == 1.0
    far_hits = float((y[y != -100][dist > reach] == vocab // 2).float().mean())
    assert out["accuracy_far"] == pytest.approx(far_hits) and far_hits < 0.05
    assert mqar_accuracy(LookupOracle(vocab, kv), x, y, kv)["accuracy_far"] is None   # no split without a distance


def test_training_learns_recall_and_rows():
    rows = run_grid(llama_factory(hidden_size=64, num_layers=2, num_heads=4), [16], [2, 8], steps=100,
                    arch="llama", size="tiny", profile="test", vocab_size=32, batch_size=32, lr=1e-2, num_test=200)
    ok, skipped = rows
    assert ok["status"] == "ok" and ok["n_params"] > 0 and ok["wall_s"] > 0
    assert ok["accuracy"] > 4 * (1 / 16)                  # chance = 1 / (vocab/2 values)
    assert skipped["status"].startswith("not run") and skipped["accuracy"] is None
    assert set(MQAR_COLUMNS + PROVENANCE_COLUMNS) <= set(ok)
    assert np.isfinite(ok["final_train_loss"]) and ok["chance"] == 2 / 32


def test_a_nan_gradient_stops_mqar_training_naming_the_step():
    """MQAR does not clip (Zoology's recipe), but its gradient norm is checked each step all the same."""
    from suite.experiments.mqar.train import train_and_eval
    from suite.train.loop import TrainingDivergedError
    from tests.tiny import nan_gradient_on_call

    built = []
    factory = llama_factory(hidden_size=32, num_layers=1, num_heads=2)

    def poisoned(vocab_size):
        built.append(nan_gradient_on_call(factory(vocab_size=vocab_size), 3))
        return built[-1]

    with pytest.raises(TrainingDivergedError, match=r"the gradient norm is nan at step 3 of 5 \(MQAR training, "
                                                    r"seq_len 16, 2 pairs, 4 rows\)"):
        train_and_eval(poisoned, [(16, 2)], 5, vocab_size=32, batch_size=4, num_test=4)
    assert all(torch.isfinite(p).all() for p in built[0].parameters())


def test_one_model_per_seq_len_evaluated_at_every_pair_count():
    rows = run_grid(partial(build, "swa", "1M", window_size=4), [32], [2, 4, 16], steps=3, arch="swa", size="1M",
                    profile="test", train_kv=[2], window=4, num_layers=2, vocab_size=64, batch_size=8, num_test=16)
    by_kv = {r["num_kv_pairs"]: r for r in rows}
    assert by_kv[2]["status"] == by_kv[4]["status"] == "ok" and by_kv[2]["train_kv"] == by_kv[4]["train_kv"] == "2"
    assert by_kv[2]["far_distance"] == 6 and by_kv[2]["n_far"] + by_kv[2]["n_near"] == 16 * 2
    assert by_kv[16]["status"].startswith("not run")


def test_kv_groups_parse_one_list_or_one_group_per_seq_len():
    from suite.experiments.mqar.run import kv_groups

    assert kv_groups("4,8") == [4, 8]
    assert kv_groups("16,32/32,64") == [[16, 32], [32, 64]]
    assert kv_groups("16//64") == [[16], [], [64]]


def test_train_kv_per_seq_len_broadcasts_or_aligns():
    from suite.experiments.mqar.grid import mixture_text, train_kv_per_seq_len

    flat = train_kv_per_seq_len([16, 64], [2, 8])
    assert flat == {16: [2], 64: [2, 8]}                   # 8 pairs need 32 tokens: only at 64
    aligned = train_kv_per_seq_len([256, 512], [[16, 32], []])
    assert aligned == {256: [16, 32], 512: []} and mixture_text(aligned) == "256:16+32"
    with pytest.raises(ValueError, match="2 per-seq_len lists for 3 seq_lens"):
        train_kv_per_seq_len([64, 128, 256], [[4], [8]])
    with pytest.raises(ValueError, match=r"at seq_len 64: every count must be <= seq_len / 4 = 16"):
        train_kv_per_seq_len([64], [[32]])


def test_one_model_trained_on_the_mixture_in_turn_and_evaluated_at_every_cell(monkeypatch):
    """Zoology's recipe: step s trains on cell s mod (number of cells), one model for the whole grid."""
    from suite.experiments.mqar import train as mqar_train

    drawn = []
    real = mqar_train.mqar_data

    def recording(vocab_size, seq_len, num_kv_pairs, num_examples, seed, *args, **kwargs):
        if num_examples == 8:                                   # the training batches (tests use 16 rows)
            drawn.append((seq_len, num_kv_pairs))
        return real(vocab_size, seq_len, num_kv_pairs, num_examples, seed, *args, **kwargs)

    monkeypatch.setattr(mqar_train, "mqar_data", recording)
    rows = run_grid(partial(build, "transformer", "1M"), [16, 32], [2, 4, 8], steps=5, arch="transformer",
                    size="1M", profile="test", train_kv=[[2], [2, 8]], vocab_size=64, batch_size=8, num_test=16)
    assert drawn == [(16, 2), (32, 2), (32, 8), (16, 2), (32, 2)]
    by_cell = {(r["seq_len"], r["num_kv_pairs"]): r for r in rows}
    assert list(by_cell) == [(16, 2), (16, 4), (16, 8), (32, 2), (32, 4), (32, 8)]
    assert by_cell[(16, 8)]["status"].startswith("not run: num_kv_pairs=8 > seq_len/4=4")
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 5 and len({(r["final_train_loss"], r["wall_s"]) for r in ok}) == 1   # one model
    assert [r["train_kv"] for r in ok] == ["2", "2", "2+8", "2+8", "2+8"]
    assert {r["train_mix"] for r in ok} == {"16:2 32:2+8"} and ok[0]["num_train"] == 5 * 8


def test_one_seq_len_mixture_is_the_old_single_length_training():
    """With one seq_len a flat train_kv and the same list per seq_len train the same model (the default profile's
    cell: one model trained at its pair counts, evaluated at every pair count)."""
    kwargs = dict(arch="swa", size="1M", profile="test", window=4, num_layers=2, vocab_size=64, batch_size=8,
                  num_test=16)
    flat = run_grid(partial(build, "swa", "1M", window_size=4), [32], [2, 4], 3, train_kv=[2, 4], **kwargs)
    aligned = run_grid(partial(build, "swa", "1M", window_size=4), [32], [2, 4], 3, train_kv=[[2, 4]], **kwargs)
    keys = ["accuracy", "accuracy_far", "final_train_loss", "train_kv", "train_mix"]
    assert [{k: r[k] for k in keys} for r in flat] == [{k: r[k] for k in keys} for r in aligned]


def test_cli_refuses_train_kv_groups_that_do_not_match_seq_lens(capsys):
    from suite.experiments.mqar.run import main

    with pytest.raises(SystemExit):
        main(["--arch", "transformer", "--size", "1M", "--seq-len", "64,128", "--train-kv", "4/8/16",
              "--out", "/tmp/never.csv"])
    assert "--train-kv: train_kv has 3 per-seq_len lists for 2 seq_lens" in capsys.readouterr().err


def test_curriculum_and_constant_tokens_schedule(monkeypatch):
    """first_cell_frac: the first round(frac * steps) steps on mixture[0] alone, then the mixture in turn;
    constant_tokens: batch_size * T_min // T rows at T; num_train counts the rows actually drawn, tokens their
    tokens."""
    from suite.experiments.mqar import train as mqar_train

    drawn = []
    real = mqar_train.mqar_data

    def recording(vocab_size, seq_len, num_kv_pairs, num_examples, seed, *args, **kwargs):
        if num_examples != 16 and num_examples != 1:                # not the held-out sets nor the fail-fast probes
            drawn.append((seq_len, num_kv_pairs, num_examples))
        return real(vocab_size, seq_len, num_kv_pairs, num_examples, seed, *args, **kwargs)

    monkeypatch.setattr(mqar_train, "mqar_data", recording)
    rows = run_grid(partial(build, "transformer", "1M"), [16, 32, 64], [2], steps=8, arch="transformer",
                    size="1M", profile="test", train_kv=[[2], [2], [4]], vocab_size=64, batch_size=8, num_test=16,
                    first_cell_frac=0.25, constant_tokens=True)
    assert drawn == [(16, 2, 8), (16, 2, 8),                                  # 2 of 8 steps on the first cell
                     (16, 2, 8), (32, 2, 4), (64, 4, 2), (16, 2, 8), (32, 2, 4), (64, 4, 2)]
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and {r["num_train"] for r in ok} == {8 + 8 + 8 + 4 + 2 + 8 + 4 + 2}
    assert {r["tokens"] for r in ok} == {sum(seq_len * rows for seq_len, _, rows in drawn)} == {16 * 8 * 8}
    assert {(r["first_cell_frac"], r["constant_tokens"]) for r in ok} == {(0.25, True)}


@pytest.mark.parametrize("frac, message", [(1.0, "--first-cell-frac 1.0 must be in [0, 1)"),
                                           (-0.1, "argument --first-cell-frac: must be a number in [0, 1], got -0.1")])
def test_first_cell_frac_outside_unit_interval_is_refused(frac, message, capsys):
    from suite.experiments.mqar.run import main
    from suite.experiments.mqar.train import train_and_eval

    with pytest.raises(ValueError, match=rf"first_cell_frac={frac} must be in \[0, 1\)"):
        train_and_eval(llama_factory(hidden_size=16, num_layers=1, num_heads=2), [(16, 2)], steps=2,
                       vocab_size=64, batch_size=4, num_test=4, first_cell_frac=frac)
    with pytest.raises(SystemExit):
        main(["--arch", "transformer", "--size", "1M", "--seq-len", "64", "--first-cell-frac", str(frac),
              "--out", "/tmp/never.csv"])
    assert message in capsys.readouterr().err


def test_warmup_and_stop_after_follow_the_schedule(monkeypatch):
    """The lr of each optimizer step is lr * (s + 1) / warmup during the warmup, times the cosine over all ``steps``
    (written out here, not read from suite.train.optim); stop_after trains only the first steps of that schedule."""
    import math

    from suite.experiments.mqar import train as mqar_train

    lrs = []
    real_step = torch.optim.AdamW.step

    def recording_step(self, *args, **kwargs):
        lrs.append(self.param_groups[0]["lr"])
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)
    out = mqar_train.train_and_eval(llama_factory(hidden_size=16, num_layers=1, num_heads=2), [(16, 2)], steps=10,
                              vocab_size=64, batch_size=4, num_test=4, lr=0.01, warmup=4, stop_after=6)
    expected = [0.01 * min(1, (s + 1) / 4) * 0.5 * (1 + math.cos(math.pi * s / 10)) for s in range(6)]
    assert lrs == pytest.approx(expected, rel=1e-12) and out["num_train"] == 6 * 4
    lrs.clear()
    mqar_train.train_and_eval(llama_factory(hidden_size=16, num_layers=1, num_heads=2), [(16, 2)], steps=3,
                        vocab_size=64, batch_size=4, num_test=4, lr=0.01)
    assert lrs == pytest.approx([0.01, 0.0075, 0.0025], rel=1e-12)      # no warmup: the cosine alone


@pytest.mark.parametrize("kwargs,message", [({"warmup": -1}, "warmup=-1 must be >= 0"),
                                            ({"stop_after": 0}, r"stop_after=0 must be in \[1, steps=2\]"),
                                            ({"stop_after": 3}, r"stop_after=3 must be in \[1, steps=2\]")])
def test_bad_warmup_or_stop_after_is_refused(kwargs, message, capsys):
    from suite.experiments.mqar.run import main
    from suite.experiments.mqar.train import train_and_eval

    with pytest.raises(ValueError, match=message):
        train_and_eval(llama_factory(hidden_size=16, num_layers=1, num_heads=2), [(16, 2)], steps=2,
                       vocab_size=64, batch_size=4, num_test=4, **kwargs)
    with pytest.raises(SystemExit):
        main(["--arch", "transformer", "--size", "1M", "--seq-len", "64", "--steps", "2", "--stop-after", "3",
              "--out", "/tmp/never.csv"])
    assert "--stop-after 3 must be <= --steps 2" in capsys.readouterr().err


def test_log_lines_are_those_the_control_calibration_reads(capsys):
    """--log-every: a line every N steps and at the last, in the form tools/offline_gpu/mqar_control.py reads
    (``step N ... loss X ...``)."""
    import importlib.util
    from pathlib import Path

    from suite.experiments.mqar.train import train_and_eval

    path = Path(__file__).resolve().parents[1] / "tools" / "offline_gpu" / "mqar_control.py"
    spec = importlib.util.spec_from_file_location("mqar_control_under_test", path)
    ctl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ctl)
    out = train_and_eval(llama_factory(hidden_size=16, num_layers=1, num_heads=2), [(16, 2)], steps=5, vocab_size=64,
                         batch_size=4, num_test=4, log_every=2)
    log = capsys.readouterr().out
    assert [int(step) for step, _ in ctl.STEP_LINE.findall(log)] == [2, 4, 5] and ctl.last_step(log) == 5
    assert float(ctl.STEP_LINE.findall(log)[-1][1]) == pytest.approx(out["final_train_loss"], abs=1e-4)


def test_cli_override_makes_a_labelled_variant(tmp_path, capsys):
    """--override sets model config values (GLA's short convolution) and needs --label-arch, whose name the rows
    carry; a key no config field reads, or --override without a label, is refused before any training."""
    from suite.experiments.mqar.run import main
    from suite.provenance import read_csv

    common = ["--arch", "gla", "--size", "1M", "--seq-len", "32", "--kv-pairs", "2", "--steps", "2",
              "--vocab-size", "64", "--batch-size", "4", "--num-test", "4"]
    with pytest.raises(SystemExit):
        main(common + ["--override", "gla_short_conv=true", "--out", str(tmp_path / "a.csv")])
    assert "name the variant with --label-arch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(common + ["--override", "gla_short_cov=true", "--label-arch", "gla_conv",
                       "--out", str(tmp_path / "b.csv")])
    assert "gla_short_cov=True is not a field of GLAConfig" in capsys.readouterr().err
    assert not (tmp_path / "a.csv").exists() and not (tmp_path / "b.csv").exists()
    main(common + ["--override", "gla_short_conv=true", "--label-arch", "gla_conv", "--out", str(tmp_path / "c.csv")])
    rows = read_csv(tmp_path / "c.csv")
    assert set(rows["arch"]) == {"gla_conv"}
