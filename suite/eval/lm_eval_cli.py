"""The ``lm_eval`` command line with the project's models registered.

``lm_eval --model hf --model_args pretrained=DIR`` only loads a checkpoint whose ``model_type`` (orthros, ...) is
known to ``AutoConfig``, i.e. after ``models`` / ``baselines`` are imported. This entry point imports them
(``models.registry.register_auto_classes``), registers ``--model orthros-hf`` (``suite.eval.harness``), keeps the Hub
offline (``suite.eval.harness.force_offline``), then hands every argument to lm-eval's own CLI::

    python -m suite.eval.lm_eval_cli --model hf --model_args pretrained=DIR --tasks arc_easy \\
        --include_path suite/eval/tasks
"""
from models.registry import register_auto_classes
from suite.eval.harness import force_offline  # importing it also registers --model orthros-hf with lm-eval


def main() -> None:
    from lm_eval.__main__ import cli_evaluate

    force_offline()
    register_auto_classes()
    cli_evaluate()


if __name__ == "__main__":
    main()
