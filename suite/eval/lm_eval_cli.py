"""The ``lm_eval`` command line with the project's models registered.

``lm_eval --model hf --model_args pretrained=DIR`` only loads a checkpoint whose ``model_type`` (orthros, ...) is
known to ``AutoConfig``, i.e. after ``models`` / ``baselines`` are imported. This entry point imports them
(``models.registry.register_auto_classes``) and registers ``--model orthros-hf`` (``suite.eval.harness``), then
hands every argument to lm-eval's own CLI::

    python -m suite.eval.lm_eval_cli --model hf --model_args pretrained=DIR --tasks arc_easy --include_path suite/eval/tasks
"""
from models.registry import register_auto_classes
from suite.eval import harness  # noqa: F401  (importing it registers --model orthros-hf with lm-eval)


def main() -> None:
    from lm_eval.__main__ import cli_evaluate

    register_auto_classes()
    cli_evaluate()


if __name__ == "__main__":
    main()
