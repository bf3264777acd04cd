"""suite.cli: the CLI number-list parser every module shares."""
from __future__ import annotations

import argparse

import pytest

from suite.cli import int_list, number_list


def test_number_lists_parse_and_name_what_is_wrong():
    assert int_list("1, 2,,4") == [1, 2, 4]
    assert number_list("0,0.25,1", float, "--depths", minimum=0, maximum=1) == [0.0, 0.25, 1.0]
    assert int_list("", allow_empty=True) == [] and int_list("-3", minimum=None) == [-3]
    for text, kwargs, message in [("1,x", {}, "--n must be comma-separated integers, got '1,x'"),
                                  ("", {}, "--n must hold at least one value"),
                                  ("0,2", {}, "--n must be integers >= 1, got '0,2'")]:
        with pytest.raises(ValueError, match=message):
            int_list(text, "--n", **kwargs)
    with pytest.raises(argparse.ArgumentTypeError, match=r"--depths must be numbers <= 1, got '0.5,1.5'"):
        number_list("0.5,1.5", float, "--depths", maximum=1, error=argparse.ArgumentTypeError)
    with pytest.raises(ValueError, match="comma-separated numbers"):
        number_list("0.5,a", float)
