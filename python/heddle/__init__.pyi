# Type stubs of `import heddle` (docs/python.md). Results carry the CLI's JSON keys as attributes.
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy

class Error(Exception): ...
class InternalError(Exception): ...

ValueInfo = Tuple[str, List[int], str]
Size = Union[int, float, str]

class Model:
    name: str
    parameters: int
    flops: float
    ops: int
    inputs: List[ValueInfo]
    outputs: List[ValueInfo]
    def summary(self) -> str: ...
    def text(self) -> str: ...
    def _repr_html_(self) -> str: ...

class Cluster:
    name: str
    count: int
    device: str
    memory_bytes: float
    def __init__(self, spec: Union[str, Dict[str, Any]]) -> None: ...

class Result:
    def __getattr__(self, key: str) -> Any: ...
    def __getitem__(self, key: str) -> Any: ...
    def keys(self) -> Iterable[str]: ...
    def to_json(self) -> str: ...

class Plan(Result):
    strategy: str
    step_time_s: float
    mfu: float
    tflops_per_device: float
    peak_memory_bytes: float
    memory_limit_bytes: float
    memory_reserve_bytes: float
    bubble_fraction: float
    comm_bytes: float
    stages: int
    devices: int
    feasible: bool
    ranking: List[Dict[str, Any]]
    runnable_by: List[str]
    rank_groups: Dict[str, List[List[int]]]
    def export(self, fmt: str) -> str: ...
    def trace(self, path: Optional[str] = ...) -> str: ...
    def plot(self, ax: Any = ...) -> Any: ...

class RunResult(Result):
    outputs: List[numpy.ndarray]
    loss: List[float]
    ok: bool
    max_abs_error: float
    max_rel_error: float
    devices: int
    strategy: str
    step_times_s: List[float]
    median_step_s: float
    step_cpu_s: List[float]
    median_step_cpu_s: float
    wall_time_s: float
    peak_bytes_per_device: List[int]
    held_bytes_per_device: List[int]
    predicted_peak_bytes_per_device: List[float]

class Schedule(Result):
    makespan: float
    period: float
    bubble_fraction: float
    peak_memory: List[float]
    lower_bound: float
    valid: bool
    blocks: List[Dict[str, Any]]
    def plot(self, ax: Any = ...) -> Any: ...

def load(name_or_path: str, dims: Optional[Mapping[str, int]] = ..., **overrides: int) -> Model: ...
def from_torch(module: Any, example_inputs: Any, dynamic_batch: bool = ...) -> Model: ...
def plan(
    model: Model,
    cluster: Union[Cluster, str, Dict[str, Any]],
    train: bool = ...,
    batch: Optional[int] = ...,
    memory: Optional[Size] = ...,
    strategy: str = ...,
    objective: str = ...,
    time_limit: float = ...,
    max_devices: int = ...,
    target_step_time: float = ...,
    target: str = ...,
    memory_reserve: Optional[Size] = ...,
) -> Plan: ...
def simulate(
    model: Model,
    cluster: Union[Cluster, str, Dict[str, Any]],
    strategy: str,
    train: bool = ...,
    batch: Optional[int] = ...,
    memory: Optional[Size] = ...,
    overlap: bool = ...,
) -> Plan: ...
def run(
    model: Model,
    mesh: Union[int, str] = ...,
    strategy: str = ...,
    inputs: Union[Sequence[Any], Mapping[str, Any], None] = ...,
    train: bool = ...,
    steps: int = ...,
    check: bool = ...,
    backend: str = ...,
    seed: int = ...,
    lr: float = ...,
    optimizer: str = ...,
    ring_overlap: bool = ...,
    rtol: float = ...,
    atol: float = ...,
    host_memory: Union[int, str, None] = ...,
    profile: bool = ...,
) -> RunResult: ...
def schedule(
    placement: str,
    devices: int = ...,
    micro_batches: int = ...,
    memory: float = ...,
    baseline: Optional[str] = ...,
    time_limit: float = ...,
) -> Schedule: ...
