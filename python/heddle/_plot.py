"""Pictures of plans and schedules (matplotlib): the pipeline timeline per device or stage, one
bar per block coloured by its type, and a plan's peak memory per stage against the limit."""

_COLOURS = {
    "forward": "#4c72b0",
    "backward": "#dd8452",
    "input-grad": "#dd8452",
    "weight-grad": "#c44e52",
    "recompute": "#8172b3",
}


def _colour(kind):
    return _COLOURS.get(kind, "#55a868")


def _figure(ax, rows):
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt

    return plt.subplots(1, 1, figsize=(10, 1 + 0.5 * max(rows, 1)))


def _timeline(ax, rows, labels, unit):
    """rows: {row: [(start, length, kind, label)]}."""
    kinds = set()
    for r, bars in rows.items():
        for start, length, kind, _ in bars:
            kinds.add(kind)
        ax.broken_barh(
            [(s, d) for s, d, _, _ in bars],
            (r - 0.4, 0.8),
            facecolors=[_colour(k) for _, _, k, _ in bars],
            edgecolor="white",
            linewidth=0.5,
        )
    ax.set_yticks(sorted(rows))
    ax.set_yticklabels([labels[r] for r in sorted(rows)])
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    from matplotlib.patches import Patch

    ax.legend(
        handles=[Patch(color=_colour(k), label=k) for k in sorted(kinds)],
        loc="upper right",
        fontsize="small",
    )


def plot_schedule(s, ax=None):
    """The schedule's blocks per device; returns the matplotlib Figure."""
    rows = {}
    for b in s.blocks:
        rows.setdefault(b["device"], []).append(
            (b["start"], b["end"] - b["start"], b["type"], b["block"])
        )
    fig, ax = _figure(ax, s.devices)
    _timeline(ax, rows, {d: "device {}".format(d) for d in rows}, "time (units of block span)")
    ax.set_title(
        "{}: {} micro-batches, makespan {:g}, bubble {:.1%}".format(
            s.placement, s.micro_batches, s.makespan, s.bubble_fraction
        )
    )
    return fig


def plot_plan(p, trace, ax=None):
    """The plan's simulated step per stage (from its trace) and the peak memory per stage."""
    import matplotlib.pyplot as plt

    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    labels, rows = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            labels[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "X":
            rows.setdefault(e["pid"], []).append(
                (e["ts"] / 1e6, e["dur"] / 1e6, e.get("cat", ""), e["name"])
            )
    for r in rows:
        labels.setdefault(r, "stage {}".format(r))
    if ax is None:
        fig, (ax, mem) = plt.subplots(
            1, 2, figsize=(13, 1.5 + 0.5 * max(len(rows), 1)), gridspec_kw={"width_ratios": [4, 1]}
        )
    else:
        fig, mem = ax.figure, None
    _timeline(ax, rows, labels, "seconds")
    ax.set_title("{}: step {:.4g} s, bubble {:.1%}".format(p.strategy, p.step_time_s, p.bubble_fraction))
    if mem is not None:
        peaks = [b / 2**30 for b in p.stage_memory_bytes]
        mem.barh(range(len(peaks)), peaks, color="#4c72b0")
        mem.axvline(p.memory_limit_bytes / 2**30, color="#c44e52", linestyle="--", label="limit")
        mem.set_yticks(range(len(peaks)))
        mem.set_yticklabels(["stage {}".format(i) for i in range(len(peaks))])
        mem.invert_yaxis()
        mem.set_xlabel("peak memory (GiB)")
        mem.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig
