"""heddle.schedule: equal to `heddle schedule --json`; its blocks and plot."""
import pytest

import heddle
from conftest import cli_json


def test_schedule_equals_the_cli(tmp_path):
    q = heddle.schedule("vshape", devices=4, micro_batches=8, memory=4)
    want = cli_json("schedule", "--placement", "vshape", "--devices", "4", "--micro-batches", "8", "--memory", "4")
    for key in ("makespan", "period", "bubble_fraction", "peak_memory", "lower_bound", "valid"):
        assert q[key] == want[key], key
    assert max(b["end"] for b in q.blocks) == q.makespan
    assert {b["device"] for b in q.blocks} == {0, 1, 2, 3}
    assert "device" in str(q) or str(q)
    fig = q.plot()
    assert len(fig.axes[0].collections) == 4
    fig.savefig(str(tmp_path / "schedule.png"))


def test_baseline_and_errors():
    b = heddle.schedule("vshape", devices=4, micro_batches=8, memory=8, baseline="1f1b")
    assert b.method.startswith("baseline")
    with pytest.raises(heddle.Error):
        heddle.schedule("vshape", devices=0, micro_batches=8, memory=4)
    with pytest.raises(heddle.Error):
        heddle.schedule("vshape", devices=4, micro_batches=8, memory=4, baseline="nonsense")
