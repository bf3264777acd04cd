"""The ``lm_eval`` command line with the project's models registered.

``lm_eval --model hf --model_args pretrained=DIR`` only loads a checkpoint whose ``model_type`` (orthros, ...) is
known to ``AutoConfig``, i.e. after ``models`` / ``baselines`` are imported. This entry point imports them
(``models.registry.register_auto_classes``), registers ``--model orthros-hf`` (``suite.eval.harness``), keeps the Hub
offline (``suite.eval.harness.force_offline``), refuses a ``pretrained=`` / ``tokenizer=`` path that does not exist
(``checkpoint not found: PATH``, exit status 2; a Hub id such as ``owner/name`` goes through), then hands every
argument to lm-eval's own CLI::

    python -m suite.eval.lm_eval_cli --model hf --model_args pretrained=DIR --tasks arc_easy \\
        --include_path suite/eval/tasks
"""
import argparse
import sys

from models.registry import register_auto_classes
from suite.cli import usage_errors
from suite.eval.harness import force_offline  # importing it also registers --model orthros-hf with lm-eval
from suite.train.checkpoint import checkpoint_folder

PROG = "python -m suite.eval.lm_eval_cli"


def check_model_paths(argv: list[str]) -> None:
    """Exit 2 naming a ``--model_args`` ``pretrained`` / ``tokenizer`` path that is not there; the arguments are
    read as lm-eval reads them (``key=val,key2=val2``, several words, or JSON). Anything lm-eval's own parser
    would refuse is left to it."""
    try:
        from lm_eval._cli.utils import MergeDictAction
    except ImportError:  # another lm-eval layout: its own error messages only
        return
    pre = argparse.ArgumentParser(prog=PROG, usage=f"{PROG} [lm-eval arguments] (--help lists them)",
                                  add_help=False, allow_abbrev=False)
    pre.add_argument("--model_args", "-a", nargs="+", action=MergeDictAction, default=None)
    try:
        model_args = pre.parse_known_args(argv)[0].model_args or {}
    except (ValueError, SystemExit):
        return
    with usage_errors(pre, FileNotFoundError, NotADirectoryError, ValueError):
        for key in ("pretrained", "tokenizer"):
            if isinstance(model_args.get(key), str):
                try:
                    checkpoint_folder(model_args[key], hub_ids=True)
                except (OSError, ValueError) as err:
                    raise type(err)(f"--model_args {key}: {err}") from None


def main() -> None:
    from lm_eval.__main__ import cli_evaluate

    check_model_paths(sys.argv[1:])
    force_offline()
    register_auto_classes()
    cli_evaluate()


if __name__ == "__main__":
    main()
