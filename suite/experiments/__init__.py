"""The study's experiments, one folder each: its README, rules, runner, collect step and table or figure code."""
