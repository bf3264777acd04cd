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
