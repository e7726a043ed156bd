"""heddle.plan / simulate / Cluster: equal to `heddle plan --json` and `heddle simulate --json`
for the same request; exports equal to `--export`, flag by flag; trace and plot."""
import json
import warnings

import pytest

import heddle
from conftest import cli, cli_json

ARGS = ["gpt-tiny", "--cluster", "a100x8", "--train", "--time-limit", "20"]


@pytest.fixture(scope="module")
def planned():
    return heddle.plan(heddle.load("gpt-tiny"), heddle.Cluster("a100x8"), train=True, time_limit=20)


def test_plan_equals_the_cli(planned):
    want = cli_json("plan", *ARGS)
    for key in ("strategy", "step_time_s", "mfu", "peak_memory_bytes", "memory_limit_bytes",
                "bubble_fraction", "stages", "devices", "feasible", "runnable_by", "rank_groups",
                "memory_reserve_bytes", "target"):
        assert getattr(planned, key) == want[key], key
    assert planned.ranking and planned.ranking[0]["strategy"] == planned.strategy
    # One search and one report: every key of the CLI's JSON, equal except the clock's.
    for key, value in want.items():
        assert key in dir(planned), key
        if key not in ("search_time_s",):
            assert planned[key] == value, key
    assert json.loads(planned.to_json())["strategy"] == planned.strategy
    with pytest.raises(AttributeError, match="step_time_s"):
        planned.no_such_key


def test_simulate_equals_the_cli():
    m = heddle.load("gpt-tiny")
    s = heddle.simulate(m, "a100x8", "dp=2,tp=2,pp=2", train=True)
    want = cli_json("simulate", "gpt-tiny", "--cluster", "a100x8", "--strategy", "dp=2,tp=2,pp=2", "--train")
    for key in ("strategy", "step_time_s", "mfu", "peak_memory_bytes", "bubble_fraction", "devices"):
        assert s[key] == want[key], key
    # One simulation and one report: every key of the CLI's JSON, equal.
    for key, value in want.items():
        assert s[key] == value, key
    assert s.rank_groups["pp"] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert want["runnable_by"] == s.runnable_by and "megatron" in s.runnable_by
    assert len(s.stages) == 2 and s.stages[0]["tp"] == 2


def test_batch_and_memory_follow_the_cli():
    m = heddle.load("gpt-tiny")
    p = heddle.plan(m, "a100x8", train=True, batch=16, memory="40GiB", memory_reserve=0, time_limit=20)
    want = cli_json("plan", *ARGS, "--batch", "16", "--memory", "40GiB", "--memory-reserve", "0")
    assert p.strategy == want["strategy"] and p.step_time_s == want["step_time_s"]
    assert p.memory_limit_bytes == 40 * 2**30 and p.memory_reserve_bytes == 0


def test_clusters_from_names_and_dicts():
    c = heddle.Cluster("h100x64")
    assert (c.count, c.device) == (64, "h100")
    d = heddle.Cluster({"name": "mine", "device": "a100", "count": 16,
                        "intra_node": {"bandwidth": 3e11, "latency": 1e-5},
                        "inter_node": {"bandwidth": 5e10}})
    assert d.name == "mine" and d.count == 16
    with pytest.raises(heddle.Error, match="unknown cluster"):
        heddle.Cluster("z900")


@pytest.mark.parametrize("fmt", ["megatron", "torchtitan", "deepspeed"])
def test_exports_equal_the_cli(fmt):
    m = heddle.load("gpt-tiny")
    p = heddle.plan(m, "a100x8", train=True, target=fmt, time_limit=20)
    assert fmt in p.runnable_by
    _, out, _ = cli("plan", *ARGS, "--export", fmt)
    with warnings.catch_warnings():  # the CLI prints the notes to stderr
        warnings.simplefilter("ignore")
        text = p.export(fmt)
    assert text == out


def test_megatron_flags_one_by_one():
    p = heddle.simulate(heddle.load("gpt-tiny"), "a100x8", "dp=2,tp=2,pp=2,zero=1,mb=1,sp=on,recompute=selective", train=True)
    args = [l.rstrip(" \\") for l in p.export("megatron").splitlines() if not l.startswith("#")]
    flags = dict((a.split(" ", 1) + [""])[:2] for a in args)
    assert flags["--tensor-model-parallel-size"] == "2"
    assert flags["--pipeline-model-parallel-size"] == "2"
    assert "--sequence-parallel" in flags and "--use-distributed-optimizer" in flags
    assert flags["--recompute-granularity"] == "selective"
    assert flags["--micro-batch-size"] == "1"
    assert flags["--global-batch-size"] == str(p.batch)


def test_exports_refuse_what_the_stack_cannot_run():
    p = heddle.simulate(heddle.load("gpt-tiny"), "a100x8", "dp=2,tp=2,pp=2,schedule=zb-h1", train=True)
    assert p.runnable_by == ["heddle"]
    with pytest.raises(heddle.Error, match="Megatron-LM cannot run schedule=zb-h1"):
        p.export("megatron")
    with pytest.raises(heddle.Error, match="DeepSpeed cannot run pp=2"):
        p.export("deepspeed")
    with pytest.raises(heddle.Error, match="not a stack"):
        p.export("nemo")


def test_errors(tmp_path):
    m = heddle.load("gpt-tiny")
    with pytest.raises(heddle.Error, match="strategy key"):
        heddle.simulate(m, "a100x8", "dq=8")
    with pytest.raises(heddle.Error, match="not an objective"):
        heddle.plan(m, "a100x8", objective="speed")
    with pytest.raises(heddle.Error, match="not a size"):
        heddle.plan(m, "a100x8", memory="lots")
    with pytest.raises(heddle.Error, match="DeepSpeed cannot run pp=2"):
        heddle.plan(m, "a100x8", train=True, strategy="auto,pp=2", target="deepspeed")


def test_trace_and_plot(planned, tmp_path):
    path = tmp_path / "trace.json"
    text = planned.trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    assert json.loads(text) == json.loads(path.read_text())
    assert any(e.get("ph") == "X" for e in events)
    fig = planned.plot()
    assert len(fig.axes) == 2  # the timeline and the memory per stage
    assert len(fig.axes[0].collections) == planned.stages
    fig.savefig(str(tmp_path / "plan.png"))
    assert (tmp_path / "plan.png").stat().st_size > 1000
