"""The system benchmarks, beside the package (as FLA's ``benchmarks/``): command lines that time the models of
``models/`` and ``baselines/`` on the CPU or a GPU and write their CSVs row by row, each pass/fail row into
``targets.csv`` beside them. They import ``models``, ``baselines`` and ``suite``; none of those imports them
(``tests/test_registry.py``). They run from the repository root (``python -m benchmarks.prefill_gpu ...``) or as
the DAG's rules (``workflows/bench.smk``); ``benchmarks/README.md`` lists them."""
