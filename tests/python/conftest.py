"""Shared helpers: the `heddle` binary the module's results must equal, and small models."""
import json
import os
import subprocess

import pytest

SOURCE_DIR = os.environ.get(
    "HEDDLE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
)
HEDDLE_BIN = os.environ.get("HEDDLE_BIN", os.path.join(SOURCE_DIR, "build/tools/heddle/heddle"))


def cli(*args, check=True):
    """Runs `heddle ARGS`; returns (exit code, stdout, stderr)."""
    r = subprocess.run([HEDDLE_BIN, *map(str, args)], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("heddle {} exited {}: {}".format(" ".join(map(str, args)), r.returncode, r.stderr))
    return r.returncode, r.stdout, r.stderr


def cli_json(*args):
    return json.loads(cli(*args, "--json")[1])


@pytest.fixture
def tiny():
    import heddle

    return heddle.load("gpt-tiny")
