"""heddle.run: outputs equal to `heddle run --output` for the same request, zero-copy numpy,
inputs as lists or dicts, training losses equal to the CLI's, errors as exceptions, and the GIL
released while C++ works."""
import threading
import time

import numpy as np
import pytest

import heddle
from conftest import cli, cli_json


def test_outputs_equal_the_cli(tiny, tmp_path):
    r = heddle.run(tiny, mesh=4, strategy="dp=2,tp=2", check=True)
    assert r.ok and r.devices == 4 and r.max_abs_error < 1e-3
    out = tmp_path / "out.npy"
    cli("run", "gpt-tiny", "--mesh", "4", "--strategy", "dp=2,tp=2", "--output", out)
    want = np.load(out)
    assert len(r.outputs) == len(tiny.outputs)
    got = r.outputs[0]
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    assert not got.flags.owndata  # a view of the run's own tensor: no copy


def test_inputs_as_list_and_dict(tiny):
    name, shape, dtype = tiny.inputs[0]
    x = np.random.default_rng(0).integers(0, 8, size=shape).astype(np.int64)
    a = heddle.run(tiny, mesh=2, strategy="dp=2", inputs=[x], check=True)
    b = heddle.run(tiny, mesh=2, strategy="dp=2", inputs={name: x}, check=True)
    assert a.ok and b.ok
    np.testing.assert_array_equal(a.outputs[0], b.outputs[0])
    with pytest.raises(heddle.Error, match="does not have"):
        heddle.run(tiny, inputs={"nope": x})
    with pytest.raises(heddle.Error, match="shape"):
        heddle.run(tiny, inputs=[x[..., :1]])


def test_training_losses_equal_the_cli(tiny):
    r = heddle.run(heddle.load("gpt-tiny"), mesh=4, strategy="dp=2,tp=2", train=True, steps=3, check=True)
    want = cli_json("run", "gpt-tiny", "--mesh", "4", "--strategy", "dp=2,tp=2", "--train", "--steps", "3")
    assert r.ok and len(r.loss) == 3
    assert r.loss == want["loss"]
    assert len(r.step_times_s) == 3 and r.median_step_s > 0
    assert len(r.step_cpu_s) == 3 and r.median_step_cpu_s > 0


def test_run_errors():
    m = heddle.load("gpt-tiny")
    with pytest.raises(heddle.Error, match="uses 3 devices"):
        heddle.run(m, mesh=4, strategy="dp=3")
    with pytest.raises(heddle.Error, match="mpirun"):
        heddle.run(m, backend="mpi")


def test_gil_is_released_during_a_search():
    m = heddle.load("gpt3-1.3b", layers=8, batch=64)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.01)

    t = threading.Thread(target=tick)
    t.start()
    start = time.monotonic()
    try:
        heddle.plan(m, "a100x64", train=True, time_limit=3)
    finally:
        seconds = time.monotonic() - start
        stop.set()
        t.join()
    # the other thread ticked (every 10 ms) most of the time the search ran without the GIL
    assert len(ticks) > 0.3 * seconds / 0.01 and len(ticks) >= 5


def test_training_keywords_equal_the_cli_flags(tiny):
    m = heddle.load("gpt-tiny")
    r = heddle.run(m, mesh=2, strategy="dp=2", train=True, steps=2, lr=0.05, optimizer="sgd")
    want = cli_json("run", "gpt-tiny", "--mesh", "2", "--strategy", "dp=2", "--train", "--steps", "2",
                    "--lr", "0.05", "--optimizer", "sgd")
    assert r.loss == want["loss"]
    assert r.loss != heddle.run(m, mesh=2, strategy="dp=2", train=True, steps=2).loss
    # ring attention without overlap computes what the overlapped ring does, as the CLI's flag
    a = heddle.run(m, mesh=2, strategy="cp=2", train=True, steps=2, ring_overlap=False, check=True)
    b = cli_json("run", "gpt-tiny", "--mesh", "2", "--strategy", "cp=2", "--train", "--steps", "2",
                 "--no-ring-overlap")
    assert a.ok and a.loss == b["loss"]
    with pytest.raises(heddle.Error, match="optimizer"):
        heddle.run(m, train=True, optimizer="lion")
    with pytest.raises(heddle.Error, match="host"):
        heddle.run(m, host_memory="1KiB")


def test_profile_rows_cover_the_step(tiny):
    r = heddle.run(tiny, mesh=2, strategy="dp=2", train=True, steps=3, profile=True)
    rows = r.profile
    assert rows and all(row["calls"] > 0 and row["seconds"] >= 0 for row in rows)
    assert abs(sum(row["share"] for row in rows) - 1.0) < 1e-6
    kernels = {row["kernel"] for row in rows}
    assert "adamw" in kernels and "all-reduce" in kernels
    assert [row["seconds"] for row in rows] == sorted((row["seconds"] for row in rows), reverse=True)
    assert "profile" not in heddle.run(tiny, steps=1).keys()
