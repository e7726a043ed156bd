"""heddle: one tensor program, many devices.

The Python face of heddle's compiler, planner and runtime. Names and result attributes follow the
``heddle`` command (docs/cli.md, docs/python.md)::

    import heddle
    m = heddle.load("gpt3-175b", layers=48)
    p = heddle.plan(m, heddle.Cluster("a100x1024"), train=True, batch=1536)
    print(p.strategy, p.step_time_s, p.mfu)
    print(p.export("megatron"))

Errors raise :class:`heddle.Error` (your request: the CLI's message) or
:class:`heddle.InternalError` (heddle's own fault). Long work releases the GIL, and Ctrl-C stops a
search or a run within a second (KeyboardInterrupt).
"""

import io
import json
import os

from . import _heddle
from ._heddle import Error, InternalError

__all__ = [
    "Error",
    "InternalError",
    "Model",
    "Cluster",
    "Result",
    "Plan",
    "RunResult",
    "Schedule",
    "load",
    "from_torch",
    "plan",
    "simulate",
    "run",
    "schedule",
]


class Model:
    """A tensor program heddle can show, plan, simulate and run.

    Made by :func:`load` (zoo name, text-IR or ONNX file) or :func:`from_torch`.
    """

    def __init__(self, core):
        self._core = core

    @property
    def name(self):
        """The zoo name, file or torch module class the model came from."""
        return self._core.name

    @property
    def parameters(self):
        """Parameter elements of the model (all of its weights)."""
        return self._core.parameters

    @property
    def flops(self):
        """Floating-point operations of one forward pass."""
        return self._core.flops

    @property
    def ops(self):
        """Number of ops in the graph."""
        return self._core.ops

    @property
    def inputs(self):
        """The graph's inputs, in order: (name, shape, dtype) tuples."""
        return self._core.inputs

    @property
    def outputs(self):
        """The graph's outputs, in order: (name, shape, dtype) tuples."""
        return self._core.outputs

    def summary(self):
        """A few lines: ops, tensors, parameters, FLOPs, inputs and outputs."""
        return self._core.summary()

    def text(self):
        """The model in heddle's text IR (docs/ir.md)."""
        return self._core.text()

    def __repr__(self):
        return "<heddle.Model {}: {} ops, {} parameters>".format(self.name, self.ops, self.parameters)

    def _repr_html_(self):
        rows = "".join(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>".format(
                kind, _html(n), "x".join(str(d) for d in s), t
            )
            for kind, values in (("input", self.inputs), ("output", self.outputs))
            for n, s, t in values
        )
        return (
            "<b>heddle.Model</b> {}: {} ops, {:,} parameters, {:.4g} GFLOP"
            "<table><tr><th></th><th>name</th><th>shape</th><th>dtype</th></tr>{}</table>"
        ).format(_html(self.name), self.ops, self.parameters, self.flops / 1e9, rows)


def _html(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def load(name_or_path, dims=None, **overrides):
    """Loads a model: a zoo name (``heddle show --list``), a text-IR file or an ``.onnx`` file.

    Zoo models take size overrides as keywords (``layers=``, ``hidden=``, ``heads=``, ``seq=``,
    ``vocab=``, ``batch=``, and for Llama/Mixtral/MoE ``ffn=``, ``kv_heads=``, ``experts=``,
    ``top_k=``); ONNX models bind dynamic dimensions with ``dims={"name": value}``.
    Raises :class:`Error` for an unknown name, a bad file or an override that does not apply.
    """
    return Model(_heddle.load(str(name_or_path), dict(overrides), dict(dims or {})))


def from_torch(module, example_inputs, dynamic_batch=True):
    """Imports a ``torch.nn.Module`` through ``torch.onnx``, in memory.

    ``example_inputs`` is a tensor or a tuple of tensors the module accepts. With
    ``dynamic_batch`` the export marks dimension 0 of every input as the batch (bound to the
    example's batch). Raises :class:`Error` when PyTorch is not installed or the export uses an
    op heddle does not import.
    """
    try:
        import torch
    except ImportError as e:
        raise Error(
            "heddle.from_torch needs PyTorch (Debian: apt install python3-torch); "
            "or export the module to ONNX elsewhere and use heddle.load('model.onnx')"
        ) from e
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    names = ["input{}".format(i) for i in range(len(example_inputs))]
    axes = {n: {0: "batch"} for n in names} if dynamic_batch else None
    buffer = io.BytesIO()
    was_training = module.training
    module.eval()
    try:
        torch.onnx.export(
            module, example_inputs, buffer, input_names=names, dynamic_axes=axes, opset_version=17
        )
    except Exception as e:  # torch's own export errors, as heddle errors
        raise Error("torch.onnx.export failed: {}".format(e)) from e
    finally:
        module.train(was_training)
    dims = {"batch": int(example_inputs[0].shape[0])} if dynamic_batch and example_inputs else {}
    return Model(_heddle.load_onnx_bytes(buffer.getvalue(), type(module).__name__, dims))


class Cluster:
    """Devices and links to plan for.

    ``Cluster("a100x1024")`` (``<device>x<count>``, 8 devices per node), ``Cluster("cpu")`` (this
    machine's calibrated profile), a JSON cluster file's path, or a dict with that file's keys.
    """

    def __init__(self, spec):
        self._core = None
        if isinstance(spec, dict):
            self._core = _heddle.Cluster.from_json(json.dumps(spec), "<dict>")
        else:
            self._core = _heddle.Cluster(str(spec))

    name = property(lambda self: self._core.name, doc="The cluster's name.")
    count = property(lambda self: self._core.count, doc="Number of devices.")
    device = property(lambda self: self._core.device, doc="The device's name.")
    memory_bytes = property(lambda self: self._core.memory_bytes, doc="Memory per device.")

    def __repr__(self):
        return "<heddle.Cluster {}: {} x {}>".format(self.name, self.count, self.device)


def _cluster(c):
    return c._core if isinstance(c, Cluster) else Cluster(c)._core


class Result:
    """A result with the CLI's JSON keys as attributes (``r.step_time_s``, ``r["mfu"]``)."""

    def __init__(self, data):
        self._data = data

    def __getattr__(self, key):
        try:
            return self.__dict__["_data"][key]
        except KeyError:
            raise AttributeError(
                "{} has no attribute '{}'; it has {}".format(
                    type(self).__name__, key, ", ".join(sorted(self._data))
                )
            ) from None

    def __getitem__(self, key):
        return self._data[key]

    def keys(self):
        """The attribute names (the CLI's JSON keys)."""
        return self._data.keys()

    def to_json(self):
        """The result as the CLI's ``--json`` prints it (arrays left out)."""
        return json.dumps({k: v for k, v in self._data.items() if k not in ("outputs",)}, indent=2)

    def __dir__(self):
        return list(super().__dir__()) + list(self._data)

    def __repr__(self):
        keys = [k for k in ("strategy", "step_time_s", "mfu", "makespan", "ok") if k in self._data]
        return "<heddle.{} {}>".format(
            type(self).__name__, " ".join("{}={}".format(k, self._data[k]) for k in keys)
        )


class Plan(Result):
    """A priced plan (from :func:`plan` or :func:`simulate`).

    Attributes are ``heddle plan --json``'s keys: ``strategy``, ``step_time_s``, ``mfu``,
    ``peak_memory_bytes``, ``memory_limit_bytes``, ``stages``, ``ranking`` (the alternatives),
    ``runnable_by``, ``rank_groups``, ...
    """

    def __init__(self, core):
        super().__init__(json.loads(core.json))
        self._core = core

    def export(self, fmt):
        """The plan for another stack: ``"megatron"`` (command-line arguments), ``"torchtitan"``
        (a TOML job config) or ``"deepspeed"`` (a JSON config), as ``heddle plan --export``
        writes it. Raises :class:`Error` when that stack cannot run the plan, saying why."""
        text, _, notes = self._core.export(fmt)
        for n in notes:
            import warnings

            warnings.warn(n, stacklevel=2)
        return text

    def trace(self, path=None):
        """The plan's simulated step as a Chrome trace (Perfetto); written to ``path`` if given."""
        text = self._core.trace_json()
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text

    def plot(self, ax=None):
        """Draws the pipeline timeline per device and the memory per stage (matplotlib)."""
        from . import _plot

        return _plot.plot_plan(self, json.loads(self._core.trace_json()), ax)


class RunResult(Result):
    """A run's results: ``outputs`` (numpy arrays in the model's output order, sharing the run's
    memory), ``loss`` (training), ``ok``/``max_abs_error``/``max_rel_error`` (``check=True``),
    ``step_times_s``, ``median_step_s``, ``step_cpu_s``, ``median_step_cpu_s``, ``devices``, ``strategy``, ``peak_bytes_per_device``,
    ``profile`` (``profile=True``)."""


class Schedule(Result):
    """A pipeline schedule: ``makespan``, ``period``, ``bubble_fraction``, ``peak_memory``,
    ``lower_bound``, ``valid``, and ``blocks`` (each block's device, start and end)."""

    def plot(self, ax=None):
        """Draws the schedule's timeline per device (matplotlib)."""
        from . import _plot

        return _plot.plot_schedule(self, ax)

    def __str__(self):
        return self._data["timeline"]


def plan(
    model,
    cluster,
    train=False,
    batch=None,
    memory=None,
    strategy="auto",
    objective="time",
    time_limit=60,
    max_devices=0,
    target_step_time=0,
    target="any",
    memory_reserve=None,
):
    """Finds the fastest plan that fits, as ``heddle plan`` does.

    ``batch``: the global batch (zoo models); ``memory``: bytes per device (``"40GiB"`` or a
    number; default the device's); ``strategy``: ``"auto"`` or pins (``"auto,pp=8"``);
    ``objective``: ``"time"`` or ``"energy"``; ``time_limit``: seconds; ``target``: keep the
    search to what ``"megatron"``, ``"torchtitan"``, ``"deepspeed"`` or ``"heddle"`` runs;
    ``memory_reserve``: memory per device for the runtime, replacing the allocator allowance's
    fixed part (default the device's, 2 GB on GPUs; 0: none). Returns a :class:`Plan`.
    """
    return Plan(
        _heddle.plan(
            model._core,
            _cluster(cluster),
            bool(train),
            int(batch or 0),
            memory,
            strategy,
            objective,
            float(time_limit),
            int(max_devices),
            float(target_step_time),
            target,
            memory_reserve,
        )
    )


def simulate(model, cluster, strategy, train=False, batch=None, memory=None, overlap=False):
    """Prices one strategy (``"dp=8,tp=8,pp=16"``) on the cluster, as ``heddle simulate``
    does. Returns a :class:`Plan`."""
    return Plan(
        _heddle.simulate(
            model._core, _cluster(cluster), strategy, bool(train), int(batch or 0), memory, overlap
        )
    )


def _array(x):
    import numpy as np

    if hasattr(x, "detach") and hasattr(x, "numpy"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(x)


def run(
    model,
    mesh=1,
    strategy="",
    inputs=None,
    train=False,
    steps=1,
    check=False,
    backend="threads",
    seed=0,
    lr=1e-2,
    optimizer="adamw",
    ring_overlap=True,
    rtol=1e-3,
    atol=1e-4,
    host_memory=None,
    profile=False,
):
    """Partitions the model over ``mesh`` thread-devices (``4``, ``"2x2"``, ``"dp=2,tp=2"``) and
    runs ``steps`` steps, as ``heddle run`` does.

    ``inputs``: a list in the model's input order or a dict by input name, of numpy arrays or
    torch tensors (default: the CLI's random inputs). ``check=True`` compares every output with
    the single-device interpreter (``ok``, ``max_abs_error``) within ``rtol``/``atol``. ``lr``,
    ``optimizer`` (``"adamw"``, ``"sgd"``), ``ring_overlap`` and ``host_memory`` (bytes or text
    such as ``"8GiB"``; default: physical memory) are ``heddle run``'s ``--lr``, ``--optimizer``,
    ``--no-ring-overlap`` (inverted) and ``--host-memory``. ``profile=True`` is ``--profile``:
    ``profile`` holds device 0's timed step by kernel, slowest first (``kernel``, ``calls``,
    ``seconds``, ``share``). Returns a :class:`RunResult`.
    """
    arrays = None
    if inputs is not None:
        if isinstance(inputs, dict):
            names = [n for n, _, _ in model.inputs]
            unknown = sorted(set(inputs) - set(names))
            if unknown:
                raise Error(
                    "inputs names {}, which the model does not have; its inputs are {}".format(
                        ", ".join(unknown), ", ".join(names)
                    )
                )
            missing = [n for n in names if n not in inputs]
            if missing:
                raise Error("inputs lacks {}".format(", ".join(missing)))
            arrays = [_array(inputs[n]) for n in names]
        else:
            arrays = [_array(x) for x in inputs]
    return RunResult(
        _heddle.run(
            model._core, str(mesh), strategy, arrays, bool(train), int(steps), bool(check),
            backend, int(seed), float(lr), str(optimizer), bool(ring_overlap), float(rtol),
            float(atol), "" if host_memory is None else str(host_memory), bool(profile)
        )
    )


def schedule(placement, devices=0, micro_batches=1, memory=1, baseline=None, time_limit=10):
    """Searches a pipeline schedule for a placement (``"vshape"``, ``"interleaved:2"``, ... or a
    JSON placement file), as ``heddle schedule`` does; ``baseline`` builds a named baseline
    instead. Returns a :class:`Schedule`."""
    return Schedule(
        _heddle.schedule(
            str(placement), int(devices), int(micro_batches), float(memory), baseline or "",
            float(time_limit)
        )
    )
