"""Training loop on a tiny Llama and a small stdlib corpus: learning, determinism, resume, NaN, checkpoints."""
import dataclasses
import json
import math

import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from suite.provenance import PROVENANCE_COLUMNS
from suite.train.lm import TrainConfig, train
from suite.train.loop import TrainingDivergedError
from suite.train.run import main
from tests.tiny import nan_gradient_on_call

VOCAB = 512  # the tokenizer of the data_dir fixture (conftest.py)
HP = dict(batch_size=4, seq_len=64, lr=3e-3, warmup=1, min_lr_ratio=0.1, weight_decay=0.05, seed=3,
          progress=False, val_batches=2)


def tiny_llama():
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256)
    return LlamaForCausalLM(cfg)


class Counting:
    """A model factory that counts how often it was called."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return tiny_llama()


def losses(out_dir):
    return pd.read_csv(out_dir / "loss.csv")["loss"].tolist()


def test_training_reduces_loss_and_writes_outputs(data_dir, tmp_path):
    row = train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=30, arch="llama", size="tiny", **HP))
    curve = losses(tmp_path)
    assert len(curve) == 30
    assert sum(curve[-5:]) / 5 < sum(curve[:5]) / 5 - 0.5
    assert curve[0] == pytest.approx(math.log(VOCAB), abs=0.3), "untrained loss is about ln(vocab)"
    frame = pd.read_csv(tmp_path / "loss.csv")
    assert list(frame.columns) == ["step", "tokens", "loss", "lr", "tok_s", "wall_s"]
    assert frame["tokens"].iloc[-1] == 30 * 4 * 64
    assert frame["lr"].max() == pytest.approx(3e-3, rel=0.02)  # warmup reaches the peak
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert set(PROVENANCE_COLUMNS) <= set(metrics.columns)
    assert metrics["tokens"][0] == 30 * 4 * 64 and metrics["n_params"][0] == row["n_params"]
    assert metrics["val_ppl"][0] == pytest.approx(math.exp(metrics["val_loss"][0]))
    ckpt = tmp_path / "checkpoint"
    model = AutoModelForCausalLM.from_pretrained(ckpt)
    tok = AutoTokenizer.from_pretrained(ckpt)
    assert tok.eos_token == "<|endoftext|>" and model.config.eos_token_id == tok.eos_token_id
    assert json.loads((ckpt / "trainer_state.json").read_text())["step"] == 30


def test_same_seed_same_losses(data_dir, tmp_path):
    train(tiny_llama, data_dir, tmp_path / "a", TrainConfig(steps=6, **HP))
    train(tiny_llama, data_dir, tmp_path / "b", TrainConfig(steps=6, **HP))
    train(tiny_llama, data_dir, tmp_path / "c", TrainConfig(steps=6, **{**HP, "seed": 4}))
    assert losses(tmp_path / "a") == losses(tmp_path / "b")
    assert losses(tmp_path / "a") != losses(tmp_path / "c")


class Interrupt(Exception):
    pass


def interrupting(at_call, exc):
    """Factory whose model raises ``exc`` (or returns NaN loss) on its ``at_call``-th training forward."""
    def factory():
        model = tiny_llama()
        count = {"n": 0}

        def hook(module, args, kwargs, output):
            if module.training:
                count["n"] += 1
                if count["n"] == at_call:
                    if exc is None:
                        output.loss = output.loss * float("nan")
                        return output
                    raise exc("killed")
            return output

        model.register_forward_hook(hook, with_kwargs=True)
        return model
    return factory


def test_resume_after_interruption_matches_uninterrupted(data_dir, tmp_path):
    config = TrainConfig(steps=12, save_every=4, retrieval_fraction=0.25, **{**HP, "seq_len": 192})
    full = train(tiny_llama, data_dir, tmp_path / "full", config)
    with pytest.raises(Interrupt):
        train(interrupting(7, Interrupt), data_dir, tmp_path / "cut", config)
    assert json.loads((tmp_path / "cut" / "checkpoint" / "trainer_state.json").read_text())["step"] == 4
    assert not (tmp_path / "cut" / "metrics.csv").exists()
    factory = Counting()
    resumed = train(factory, data_dir, tmp_path / "cut", config)
    assert factory.calls == 1
    assert losses(tmp_path / "cut") == losses(tmp_path / "full")
    assert resumed["val_loss"] == full["val_loss"] and resumed["tokens"] == full["tokens"]
    again = Counting()
    done = train(again, data_dir, tmp_path / "cut", config)
    assert again.calls == 0, "a finished run is not recomputed"
    assert done["val_loss"] == resumed["val_loss"]
    with pytest.raises(ValueError, match=r"other settings.*'lr'"):
        train(tiny_llama, data_dir, tmp_path / "cut", dataclasses.replace(config, lr=1e-3))


def test_nan_loss_names_step(data_dir, tmp_path):
    with pytest.raises(TrainingDivergedError, match=r"loss is nan at step 5 of 10"):
        train(interrupting(5, None), data_dir, tmp_path, TrainConfig(steps=10, **HP))


def test_nan_gradient_stops_naming_the_step_and_keeps_the_last_finite_checkpoint(data_dir, tmp_path):
    """A NaN gradient at step 7 (after the checkpoint of step 4): TrainingDivergedError naming the step and the kept
    checkpoint, nothing updated or saved with it, no metrics; a resume then runs to the end as an uninterrupted run."""
    from safetensors.torch import load_file

    settings = dict(steps=10, save_every=4, **HP)
    with pytest.raises(TrainingDivergedError, match=r"the gradient norm is nan at step 7 of 10 .*the checkpoint of "
                                                    r"step 4 is kept"):
        train(lambda: nan_gradient_on_call(tiny_llama(), 7), data_dir, tmp_path / "cut", TrainConfig(**settings))
    ckpt = tmp_path / "cut" / "checkpoint"
    assert json.loads((ckpt / "trainer_state.json").read_text())["step"] == 4
    assert all(torch.isfinite(t).all() for t in load_file(str(ckpt / "model.safetensors")).values())
    assert not (tmp_path / "cut" / "metrics.csv").exists()
    resumed = train(tiny_llama, data_dir, tmp_path / "cut", TrainConfig(**settings))
    whole = train(tiny_llama, data_dir, tmp_path / "whole", TrainConfig(**settings))
    assert losses(tmp_path / "cut") == losses(tmp_path / "whole") and resumed["val_loss"] == whole["val_loss"]
    assert math.isfinite(resumed["val_loss"])
    # at the last step: the run stops before its final checkpoint, which stays the one of step 8
    with pytest.raises(TrainingDivergedError, match=r"at step 10 of 10 .*the checkpoint of step 8 is kept"):
        train(lambda: nan_gradient_on_call(tiny_llama(), 10), data_dir, tmp_path / "last", TrainConfig(**settings))
    assert json.loads((tmp_path / "last" / "checkpoint" / "trainer_state.json").read_text())["step"] == 8
    assert not (tmp_path / "last" / "metrics.csv").exists()


def test_non_finite_weights_are_never_saved(data_dir, tmp_path, monkeypatch):
    """Weights that turn non-finite with a finite gradient (here: planted after the optimizer step) stop the run at
    its next checkpoint, which is not written."""
    from suite.train import loop

    real = loop.ckpt_io.non_finite
    monkeypatch.setattr(loop.ckpt_io, "non_finite", lambda named: ["model.norm.weight"] + real(named))
    with pytest.raises(TrainingDivergedError, match=r"weights \['model\.norm\.weight'\] are not finite after step 2 "
                                                    r"of 4 .*not saved, no checkpoint was written"):
        train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=4, save_every=2, **HP))
    assert not (tmp_path / "checkpoint").exists()
    assert loop.ckpt_io.non_finite([("a", torch.ones(2)), ("b", torch.tensor([1.0, float("inf")]))]) == \
        ["model.norm.weight", "b"]


def test_corrupt_checkpoint_names_file(data_dir, tmp_path):
    with pytest.raises(Interrupt):
        train(interrupting(4, Interrupt), data_dir, tmp_path, TrainConfig(steps=6, save_every=2, **HP))
    weights = tmp_path / "checkpoint" / "model.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[-10:] = b"\xff" * 10
    weights.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match=r"corrupt checkpoint file .*model\.safetensors"):
        train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=6, save_every=2, **HP))
    (tmp_path / "checkpoint" / "trainer_state.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"corrupt checkpoint file .*trainer_state\.json"):
        train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=6, save_every=2, **HP))


def test_continued_pretraining_cli_and_init_from(data_dir, tmp_path, capsys):
    train(tiny_llama, data_dir, tmp_path / "base", TrainConfig(steps=20, **HP))
    base_final = losses(tmp_path / "base")[-1]
    main(["--model", str(tmp_path / "base" / "checkpoint"), "--data-dir", str(data_dir),
          "--out-dir", str(tmp_path / "cpt"), "--steps", "3", "--batch-size", "4", "--seq-len", "64",
          "--lr", "1e-4", "--warmup", "1", "--no-progress"])
    cpt = losses(tmp_path / "cpt")
    fresh_first = losses(tmp_path / "base")[0]
    assert len(cpt) == 3 and abs(cpt[0] - base_final) < 0.3 < fresh_first - cpt[0], "CPT starts from trained weights"
    # a length past the model's positions (256) is refused before anything is written (Base CPT would train at it,
    # the conversion arm crash at its first step)
    with pytest.raises(SystemExit):
        main(["--model", str(tmp_path / "base" / "checkpoint"), "--data-dir", str(data_dir),
              "--out-dir", str(tmp_path / "long"), "--steps", "3", "--batch-size", "2", "--seq-len", "300",
              "--no-progress"])
    assert "error: --seq-len 300 (or the train recipe's): exceeds the 256 positions of --model" in \
        capsys.readouterr().err and not (tmp_path / "long" / "run_config.json").exists()
    train(tiny_llama, data_dir, tmp_path / "conv",
          TrainConfig(steps=2, init_from=tmp_path / "base" / "checkpoint", **HP))
    assert abs(losses(tmp_path / "conv")[0] - base_final) < 0.3 < fresh_first - losses(tmp_path / "conv")[0]
    with pytest.raises(ValueError, match="shares no parameter"):
        def other():
            return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=48, intermediate_size=64,
                                                num_hidden_layers=1, num_attention_heads=2))
        train(other, data_dir, tmp_path / "bad", TrainConfig(steps=2, init_from=tmp_path / "base" / "checkpoint", **HP))


def test_bad_arguments(data_dir, tmp_path):
    with pytest.raises(ValueError, match="steps must be a positive integer, got 0"):
        train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=0, **HP))
    with pytest.raises(ValueError, match="dtype 'float8'"):
        train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=2, dtype="float8", **HP))
    # a warmup that does not end before the last step never reaches the peak lr, nor the floor (issue: 6 steps of a
    # 10-step warmup ran at lr 0 -> 5e-4): refused before anything is written
    with pytest.raises(ValueError, match=r"warmup: 10 must be below steps 6"):
        train(tiny_llama, data_dir, tmp_path / "warm", TrainConfig(steps=6, **{**HP, "warmup": 10}))
    assert not (tmp_path / "warm").exists()


def test_first_step_loss_matches_independent_forward(data_dir, tmp_path):
    """Step 1 trains on batch ``data_offset`` of the seed's stream, with the model built right after seeding."""
    from suite.data.batches import TokenBatches
    from suite.data.tokenizer import load_tokens

    train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=1, data_offset=5, **{**HP, "warmup": 0}))
    torch.manual_seed(HP["seed"])
    model = tiny_llama()
    x = TokenBatches(load_tokens(data_dir, "train"), HP["batch_size"], HP["seq_len"], HP["seed"]).batch(5)
    with torch.no_grad():
        expected = model(input_ids=x, labels=x).loss.item()
    assert losses(tmp_path)[0] == pytest.approx(expected, rel=1e-6)


def test_window_overrides():
    from suite.config import load_config
    from suite.train.model import window_overrides

    cfg = load_config("default")
    assert window_overrides("orthros", cfg, 256) == {"window_size": cfg["window"]}
    assert window_overrides("orthros_noso", cfg, 256) == {"window_size": cfg["window"]}
    assert window_overrides("swa", cfg, 256) == {"window_size": 64}
    assert window_overrides("transformer", cfg, 256) == {} and window_overrides("swa", {}, 256) == {}
    assert window_overrides("orthros_h", cfg, 256) == {"window_size": cfg["window"]}
    assert window_overrides("linear_hybrid", cfg, 256) == {} and window_overrides("gdn", cfg, 256) == {}


def test_orthros_archs_are_the_registered_two_stream_archs():
    """suite.archs.ORTHROS_ARCHS (what window_overrides, the DAG and the benchmarks branch on) names exactly the
    registered archs built from Orthros layers, so a new arch is neither caught by its name nor silently missed."""
    from models.registry import ARCHS, known_archs
    from suite.archs import ORTHROS_ARCHS

    assert ORTHROS_ARCHS == {a for a in known_archs() if ARCHS[a].model_cls.two_stream}


def test_busy_run_dir_and_missing_data(data_dir, tmp_path):
    import fcntl

    with pytest.raises(ValueError, match="corpus.json does not exist"):
        train(tiny_llama, tmp_path / "nodata", tmp_path / "run", TrainConfig(steps=2, **HP))
    (tmp_path / "run").mkdir()
    with open(tmp_path / "run" / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        with pytest.raises(ValueError, match="another process is training in"):
            train(tiny_llama, data_dir, tmp_path / "run", TrainConfig(steps=2, **HP))


def test_reused_out_dir_refuses_any_changed_setting(data_dir, tmp_path):
    """A finished Orthros 1M run is never relabelled: another arch, size or override stops with the field named,
    run_config.json is left as it was, and no metrics are written."""
    common = ["--data-dir", str(data_dir), "--out-dir", str(tmp_path), "--steps", "2", "--batch-size", "2",
              "--seq-len", "32", "--no-progress"]
    main(["--arch", "orthros", "--size", "1M", *common])
    before = (tmp_path / "run_config.json").read_bytes()
    with pytest.raises(ValueError, match=r"'arch': \('orthros', 'transformer'\).*'size': \('1M', '3M'\)"):
        main(["--arch", "transformer", "--size", "3M", *common])
    (tmp_path / "metrics.csv").unlink()
    with pytest.raises(ValueError, match=r"'arch': \('orthros', 'orthros_noso'\)"):
        main(["--arch", "orthros_noso", "--size", "1M", *common])
    with pytest.raises(ValueError,
                       match=r"'overrides': \(\{'vocab_size': 512\}, \{'vocab_size': 512, 'window_size': 8\}"):
        main(["--arch", "orthros", "--size", "1M", "--override", "window_size=8", *common])
    with pytest.raises(ValueError, match=r"'dtype': \('float32', 'bfloat16'\)"):
        main(["--arch", "orthros", "--size", "1M", "--dtype", "bfloat16", *common])
    assert (tmp_path / "run_config.json").read_bytes() == before
    assert not (tmp_path / "metrics.csv").exists()
    main(["--arch", "orthros", "--size", "1M", *common])  # the same settings resume: metrics written again
    assert pd.read_csv(tmp_path / "metrics.csv")["arch"].tolist() == ["orthros"]
    recorded = json.loads((tmp_path / "run_config.json").read_text())
    assert recorded["arch"] == "orthros" and recorded["size"] == "1M" and recorded["overrides"] == {"vocab_size": VOCAB}


def test_checkpoint_without_run_config_is_refused(data_dir, tmp_path):
    train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=2, arch="llama", size="tiny", **HP))
    (tmp_path / "run_config.json").unlink()
    with pytest.raises(ValueError, match=r"run_config\.json is missing"):
        train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=2, arch="llama", size="tiny", **HP))
    assert not (tmp_path / "run_config.json").exists()


def test_restart_if_changed_trains_afresh_when_settings_code_or_base_differ(data_dir, tmp_path, monkeypatch):
    """What the DAG passes (--restart-if-changed): Snakemake reruns a training job after an edit of the config, the
    code or the base checkpoint, and the run must then start over, not stop on (or resume, or return) the old one.
    Without the flag each difference stops naming its field; the same run is still not recomputed."""
    base, run = tmp_path / "base", tmp_path / "run"
    train(tiny_llama, data_dir, base, TrainConfig(steps=2, **HP))
    train(tiny_llama, data_dir, run, TrainConfig(steps=3, init_from=base / "checkpoint", **HP))
    recorded = json.loads((run / "run_config.json").read_text())
    assert recorded["val_batches"] == HP["val_batches"] and len(recorded["code_sha256"]) == 64
    assert recorded["tokenizer_sha256"] and recorded["base_sha256"]

    def rerun(restart, **change):
        factory = Counting()
        train(factory, data_dir, run, TrainConfig(steps=3, init_from=base / "checkpoint", restart_if_changed=restart,
                                                  **{**HP, **change}))
        return factory.calls

    # a value only the final evaluation reads
    with pytest.raises(ValueError, match=r"'val_batches': \(2, 3\)"):
        rerun(False, val_batches=3)
    assert rerun(True, val_batches=3) == 1 and json.loads((run / "run_config.json").read_text())["val_batches"] == 3
    assert rerun(True, val_batches=3) == 0, "the same finished run is not recomputed"
    # the code the run executes
    monkeypatch.setattr("suite.train.lm.source_digest", lambda *modules: "edited")
    with pytest.raises(ValueError, match=r"'code_sha256': \('[0-9a-f]{64}', 'edited'\)"):
        rerun(False, val_batches=3)
    assert rerun(True, val_batches=3) == 1
    # the weights it starts from: the base retrained with another seed
    train(tiny_llama, data_dir, base, TrainConfig(steps=2, overwrite=True, **{**HP, "seed": 4}))
    with pytest.raises(ValueError, match=r"'base_sha256'"):
        rerun(False, val_batches=3)
    assert rerun(True, val_batches=3) == 1


def test_eval_points_write_the_held_out_curve_and_resume_whole(data_dir, tmp_path):
    """eval_points: evenly spaced held-out losses on the metrics row's windows, the last at the final step; the
    training losses are those of a run without them; a resumed run ends with the uninterrupted run's curve."""
    from suite.train.lm import eval_steps

    assert eval_steps(12, 3) == [4, 8, 12] and eval_steps(10, 4) == [2, 5, 8, 10] and eval_steps(5, 0) == []
    settings = dict(steps=12, save_every=4, order="epoch", **HP)
    plain = train(tiny_llama, data_dir, tmp_path / "plain", TrainConfig(**settings))
    full = train(tiny_llama, data_dir, tmp_path / "full", TrainConfig(eval_points=3, **settings))
    curve = pd.read_csv(tmp_path / "full" / "evals.csv")
    assert curve["step"].tolist() == [4, 8, 12] and list(curve.columns) == ["step", "tokens", "val_loss"]
    assert curve["val_loss"].iloc[-1] == full["val_loss"] == plain["val_loss"]
    assert losses(tmp_path / "full") == losses(tmp_path / "plain")
    assert full["order"] == "epoch" and full["epochs"] > 0 and full["mfu"] is None  # no matmul rate on a CPU
    assert full["step_flops"] > 0
    with pytest.raises(Interrupt):
        train(interrupting(10, Interrupt), data_dir, tmp_path / "cut", TrainConfig(eval_points=3, **settings))
    train(tiny_llama, data_dir, tmp_path / "cut", TrainConfig(eval_points=3, **settings))
    assert pd.read_csv(tmp_path / "cut" / "evals.csv").equals(curve)


def test_epoch_order_and_eval_points_are_checked(data_dir, tmp_path):
    with pytest.raises(ValueError, match="order must be one of"):
        train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=2, order="shuffled", **HP))
    with pytest.raises(ValueError, match="takes no retrieval rows"):
        train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=2, order="epoch", retrieval_fraction=0.5, **HP))
    with pytest.raises(ValueError, match=r"eval_points must be an integer in \[0, steps=2\]"):
        train(tiny_llama, data_dir, tmp_path, TrainConfig(steps=2, eval_points=3, **HP))


def test_compile_trains_the_compiled_step_and_saves_the_eager_model(data_dir, tmp_path, monkeypatch):
    """compile=True: the training step runs through torch.compile (here its tracing-only "eager" backend, for time)
    with eager's losses; the saved checkpoint is the plain model."""
    calls = []
    compile_ = torch.compile

    def tracing(model, **kw):
        calls.append(type(model).__name__)
        return compile_(model, backend="eager", **kw)

    monkeypatch.setattr(torch, "compile", tracing)
    from models.registry import build

    def orthros():
        return build("orthros", "0.5M", vocab_size=VOCAB, window_size=8)

    compiled = train(orthros, data_dir, tmp_path / "c", TrainConfig(steps=3, compile=True, **HP))
    eager = train(orthros, data_dir, tmp_path / "e", TrainConfig(steps=3, **HP))
    assert calls == ["OrthrosForCausalLM"] and compiled["compile"] and not eager["compile"]
    assert losses(tmp_path / "c") == pytest.approx(losses(tmp_path / "e"), rel=1e-5)
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "c" / "checkpoint").config.model_type == "orthros"


def test_checkpoints_load_with_their_own_layers(tmp_path, monkeypatch):
    """transformers >= 5.25 would swap a loaded model's layers for kernels fetched from the Hub (a download, and other
    code than on a CPU): the suite's loader asks for the model's own layers, whatever the environment says."""
    from suite.train.checkpoint import load_model

    monkeypatch.setenv("USE_HUB_KERNELS", "1")
    tiny_llama().save_pretrained(tmp_path)
    seen = {}
    real = LlamaForCausalLM.from_pretrained.__func__

    def spy(cls, path, **kw):
        seen.update(kw)
        return real(cls, path, **kw)

    monkeypatch.setattr(LlamaForCausalLM, "from_pretrained", classmethod(spy))
    model = load_model(tmp_path, dtype=None, tokenizer=False, model_cls=LlamaForCausalLM)[0]
    assert seen["use_kernels"] is False and not getattr(model, "use_kernels", False)
