"""heddle.load and Model: the CLI's figures, HTML for notebooks, errors as exceptions."""
import os

import pytest

import heddle
from conftest import SOURCE_DIR, cli, cli_json


def test_zoo_model_matches_show():
    m = heddle.load("gpt-tiny", layers=3)
    shown = cli_json("show", "gpt-tiny", "--layers", "3")
    assert m.parameters == shown["parameters"]
    assert m.ops == shown["ops"]
    assert m.flops == pytest.approx(shown["flops"], rel=1e-12)
    assert len(m.inputs) == len(shown["inputs"]) and len(m.outputs) == len(shown["outputs"])
    assert "parameters" in m.summary() and "gpt-tiny" in m.summary()
    html = m._repr_html_()
    assert "<table>" in html and "gpt-tiny" in html


def test_llama_and_mixtral_overrides_match_show():
    m = heddle.load("llama-tiny", ffn=96, kv_heads=2)
    assert m.parameters == cli_json("show", "llama-tiny", "--ffn", "96", "--kv-heads", "2")["parameters"]
    assert m.parameters != heddle.load("llama-tiny").parameters
    x = heddle.load("mixtral-tiny", experts=4)
    assert x.parameters == cli_json("show", "mixtral-tiny", "--experts", "4")["parameters"]
    top1 = heddle.load("mixtral-tiny", top_k=1)
    assert top1.parameters == heddle.load("mixtral-tiny").parameters
    assert top1.flops < heddle.load("mixtral-tiny", top_k=3).flops
    with pytest.raises(heddle.Error, match="top_k"):
        heddle.load("mixtral-tiny", top_k=5)


def test_text_ir_and_onnx_files():
    mlp = heddle.load(os.path.join(SOURCE_DIR, "examples/mlp.hd"))
    assert mlp.ops > 0 and mlp.inputs and mlp.outputs
    assert "graph" in mlp.text()
    cnn = heddle.load(os.path.join(SOURCE_DIR, "tests/data/cnn.onnx"))
    assert cnn.parameters == cli_json("show", os.path.join(SOURCE_DIR, "tests/data/cnn.onnx"))["parameters"]


def test_errors_are_exceptions_with_the_cli_message():
    with pytest.raises(heddle.Error) as e:
        heddle.load("gpt-nonexistent")
    code, _, err = cli("show", "gpt-nonexistent", check=False)
    assert code == 1
    assert str(e.value) in err  # the CLI prints "error: " + the same message
    with pytest.raises(heddle.Error, match="unknown model override 'depth'"):
        heddle.load("gpt-tiny", depth=3)
    with pytest.raises(heddle.Error, match="apply to zoo models only"):
        heddle.load(os.path.join(SOURCE_DIR, "examples/mlp.hd"), layers=2)
    assert issubclass(heddle.InternalError, Exception)
    assert not issubclass(heddle.Error, heddle.InternalError)


def test_docstrings_explain():
    for f in (heddle.load, heddle.from_torch, heddle.plan, heddle.simulate, heddle.run, heddle.schedule):
        assert f.__doc__ and len(f.__doc__) > 80, f.__name__
    stubs = os.path.join(os.path.dirname(heddle.__file__), "__init__.pyi")
    assert os.path.exists(stubs)
