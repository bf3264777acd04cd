"""A tiny Llama causal LM and byte-level BPE tokenizer, and the suite's own stdlib data folder: test helpers
(tests/test_niah.py, tests/test_lm_eval.py, tests/conftest.py).

Nothing here touches the Hub: the tokenizer is trained on text from Python's standard library
(module docstrings), so every test can build its own model + tokenizer folder in a second.
"""
from __future__ import annotations

import pydoc
from pathlib import Path

SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"]


def stdlib_text(n_modules: int = 40) -> list[str]:
    """Docstrings of a fixed list of standard-library modules (deterministic training text)."""
    import importlib

    names = ["os", "re", "json", "math", "random", "string", "collections", "itertools", "functools", "pathlib",
             "textwrap", "argparse", "logging", "datetime", "decimal", "fractions", "statistics", "heapq",
             "bisect", "array", "csv", "shutil", "tempfile", "glob", "fnmatch", "pickle", "copy", "pprint",
             "enum", "types", "typing", "dataclasses", "contextlib", "abc", "inspect", "ast", "tokenize",
             "difflib", "zipfile", "tarfile", "subprocess", "threading", "queue", "socket", "email", "html"]
    texts = []
    for name in names[:n_modules]:
        module = importlib.import_module(name)
        texts.append(pydoc.getdoc(module) or name)
    return texts


def make_tokenizer(out_dir: str | Path, vocab_size: int = 512, texts: list[str] | None = None):
    """Train a byte-level BPE tokenizer (``tokenizers``) and save it as a ``PreTrainedTokenizerFast`` in ``out_dir``.

    Returns the tokenizer. Special tokens: ``<pad>`` (id 0), ``<s>`` (bos), ``</s>`` (eos), ``<unk>``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 300:
        raise ValueError(f"vocab_size={vocab_size} must be >= 300 (256 bytes + specials + merges)")
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(texts or stdlib_text(), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                  unk_token="<unk>")
    tok.save_pretrained(str(out_dir))
    return tok


def make_tiny_llama(out_dir: str | Path | None = None, vocab_size: int = 512, hidden_size: int = 32,
                    num_layers: int = 2, num_heads: int = 4, max_position_embeddings: int = 4096, seed: int = 0):
    """A randomly initialised ``LlamaForCausalLM`` (fp32, eval mode); saved to ``out_dir`` when given."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_heads,
                         max_position_embeddings=max_position_embeddings, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    if out_dir is not None:
        model.save_pretrained(str(out_dir))
    return model


def make_tiny_checkpoint(out_dir: str | Path, **kwargs) -> Path:
    """Tokenizer + tiny Llama saved together in ``out_dir`` (loadable by ``lm_eval --model hf``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer(out_dir)
    make_tiny_llama(out_dir, vocab_size=len(tok), **kwargs)
    return out_dir


def stdlib_data(d, max_files: int = 30, vocab_size: int = 512, held_out: float = 0.2):
    """A stdlib corpus of ``max_files`` files (``held_out`` each for val and test) with a BPE tokenizer, in ``d``."""
    from suite.data.corpus import build_corpus
    from suite.data.tokenizer import prepare

    build_corpus(d, "stdlib", max_files=max_files, val_fraction=held_out, test_fraction=held_out)
    prepare(d, "bpe", vocab_size)
    return d


def _llama_cpp_permute(w, n_head: int):
    """The row order llama.cpp stores q/k projections in (transformers' GGUF loader undoes it): within each head,
    the two rotary halves interleaved."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(path: str | Path, model, tokenizer) -> Path:
    """Write a tiny ``LlamaForCausalLM`` and its byte-level BPE tokenizer as a GGUF file (float32 tensors), the way
    llama.cpp's converter lays them out, with the ``gguf`` package: a fixture of the real GGUF loading path."""
    import json

    import gguf
    import numpy as np

    cfg, path = model.config, Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    writer.add_rope_freq_base(float(cfg.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = state["model"]["vocab"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    specials = {a["content"] for a in state["added_tokens"]}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in state["model"]["merges"]])
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    parts = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for name, tensor in model.state_dict().items():
        w = tensor.detach().float().numpy()
        if name.startswith("model.layers."):
            layer, rest = name.removeprefix("model.layers.").split(".", 1)
            part = rest.rsplit(".", 1)[0]
            if part == "self_attn.q_proj":
                w = _llama_cpp_permute(w, cfg.num_attention_heads)
            elif part == "self_attn.k_proj":
                w = _llama_cpp_permute(w, cfg.num_key_value_heads)
            gguf_name = f"blk.{layer}.{parts[part]}.weight"
        else:
            gguf_name = names[name]
        writer.add_tensor(gguf_name, np.ascontiguousarray(w, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def nan_gradient_on_call(model, at_call):
    """``model``, whose first parameter's gradient is NaN on its ``at_call``-th backward pass."""
    count = {"n": 0}

    def hook(grad):
        count["n"] += 1
        return grad * float("nan") if count["n"] == at_call else grad

    next(model.parameters()).register_hook(hook)
    return model


def make_deb(folder: str | Path, files: dict, name: str = "demo-doc", version: str = "1.0-1") -> Path:
    """A minimal Debian package ``<name>_<version>_all.deb`` in ``folder``: an ar archive with debian-binary,
    control.tar.gz and data.tar.xz holding ``files`` ({member path: str or bytes})."""
    import io
    import tarfile

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for member, text in files.items():
            blob = text.encode() if isinstance(text, str) else text
            info = tarfile.TarInfo("./" + member)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    parts = [("debian-binary", b"2.0\n"), ("control.tar.gz", b""), ("data.tar.xz", data.getvalue())]
    out = b"!<arch>\n"
    for part, blob in parts:
        out += f"{part:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(blob):<10}`\n".encode() + blob
        out += b"\n" if len(blob) % 2 else b""
    path = Path(folder) / f"{name}_{version.replace(':', '%3a')}_all.deb"
    path.write_bytes(out)
    return path
