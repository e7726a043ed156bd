"""The report of bench/torch_compare.py: markdown tables of a run's rows and issue 16's targets.

A row is a dict: group (forward, train, dist), case, what, threads, heddle_s and torch_s (median
seconds per step), heddle_rounds and torch_rounds (each round's figure), check (the "same
computation" text); with --cpu also heddle_cpu_s and torch_cpu_s (CPU seconds per step; dist
rows heddle_cpu_s only, every core's); dist rows speedup, mpi_over_threads (medians over rounds of
each round's ratio) and error.
"""


def fmt_s(t):
    if t != t:
        return "-"
    return "%.1f ms" % (t * 1e3) if t < 1 else "%.2f s" % t


def fmt_spread(t, rounds):
    """The median, and the range over rounds when there were several (the run's noise)."""
    if len(rounds) < 2:
        return fmt_s(t)
    lo, hi = min(rounds), max(rounds)
    if hi < 1:
        return "%s (%.0f-%.0f)" % (fmt_s(t), lo * 1e3, hi * 1e3)
    return "%s (%.2f-%.2f)" % (fmt_s(t), lo, hi)


def done_when(rows, transformers):
    """Issue 16's targets, read off this run's rows (`transformers`: the cases of the 0.8
    target)."""
    out = []
    single = [r for r in rows if r["group"] in ("forward", "train") and r["torch_s"] > 0]
    if single:
        worst = max(single, key=lambda r: r["heddle_s"] / r["torch_s"])
        met = sum(r["heddle_s"] <= r["torch_s"] for r in single)
        out.append("- heddle / PyTorch <= 1.0: %d of %d rows (worst %.2f, %s, threads=%d)"
                   % (met, len(single), worst["heddle_s"] / worst["torch_s"], worst["case"],
                      worst["threads"]))
    train = [r for r in rows if r["group"] == "train" and r["torch_s"] > 0
             and r["case"] in transformers]
    if train:
        met = sum(r["heddle_s"] <= 0.8 * r["torch_s"] for r in train)
        out.append("- transformer training steps <= 0.8: %d of %d rows (%s)" % (
            met, len(train), ", ".join("%s/%d %.2f" % (r["case"], r["threads"],
                                                       r["heddle_s"] / r["torch_s"]) for r in train)))
    for r in rows:
        if r["group"] == "dist" and not r.get("error") and r["what"].startswith("heddle dp=2, 2 thread"):
            out.append("- dp=2 on 2 cores over 1 device with 1 core: %.2fx (target >= 1.8x)"
                       % r["speedup"])
    mpi = [r for r in rows if "mpi_over_threads" in r]
    if mpi:
        out.append("- MPI / threads, 2 ranks: %s (target <= 1.1)" % ", ".join(
            "%s %.2f" % (r["what"].split(",")[0].replace("heddle ", ""), r["mpi_over_threads"])
            for r in mpi))
    timed = [r for r in single if r.get("torch_cpu_s", 0) > 0 and r.get("heddle_cpu_s") == r.get("heddle_cpu_s")
             and "heddle_cpu_s" in r]
    if timed:
        worst = max(timed, key=lambda r: r["heddle_cpu_s"] / r["torch_cpu_s"])
        out.append("- in CPU time per step: heddle / PyTorch <= 1.0 on %d of %d rows (worst %.2f, %s, "
                   "threads=%d)" % (sum(r["heddle_cpu_s"] <= r["torch_cpu_s"] for r in timed),
                                    len(timed), worst["heddle_cpu_s"] / worst["torch_cpu_s"],
                                    worst["case"], worst["threads"]))
    if out:
        out = ["Against issue 16's targets:", ""] + out + [""]
    return out


def table(rows, failures, meta, transformers):
    """The markdown report of a run: header, the single-device table (with CPU columns when
    measured), the dist table, the targets and the failures."""
    out = []
    out.append("heddle %s; %s" % (meta["commit"], meta["machine"]))
    out.append("load average %s before, %s after; %s; %d rounds x %d steps (train %d%s%s), %d warm-up%s; "
               "OMP_WAIT_POLICY %s; %s" % (
                   meta["load_before"], meta["load_after"], meta["elapsed"], meta["rounds"],
                   meta["steps"], meta["train_steps"],
                   " in %d rounds" % meta["train_rounds"] if "train_rounds" in meta else "",
                   (", dist %d" % meta["dist_steps"] if "dist_steps" in meta else "") +
                   (" in %d rounds" % meta["dist_rounds"] if "dist_rounds" in meta else ""),
                   meta["warmup"],
                   " (+%d before a case's first round)" % meta["first_warmup"]
                   if meta.get("first_warmup") else "", meta["omp_wait"],
                   "pinned to the first k cores at k threads" if meta["pinned"] else "not pinned"))
    out.append("")
    single = [r for r in rows if r["group"] in ("forward", "train")]
    if single:
        out.append("Times per step: median over rounds (range over rounds in brackets, ms or s).")
        out.append("")
        cpu = any("heddle_cpu_s" in r for r in single)
        out.append("| case | what | threads | heddle | PyTorch | heddle / PyTorch |%s same computation |"
                   % (" heddle CPU | PyTorch CPU | CPU ratio |" if cpu else ""))
        out.append("|---|---|---|---|---|---|---|" + ("---|---|---|" if cpu else ""))
        for r in single:
            extra = ""
            if cpu:
                hc, tc = r.get("heddle_cpu_s", float("nan")), r.get("torch_cpu_s", float("nan"))
                extra = " %s | %s | %s |" % (fmt_s(hc), fmt_s(tc),
                                             "%.2f" % (hc / tc) if tc and tc == tc else "-")
            out.append("| %s | %s | %d | %s | %s | %.2f |%s %s |" % (
                r["case"], r["what"], r["threads"], fmt_spread(r["heddle_s"], r["heddle_rounds"]),
                fmt_spread(r["torch_s"], r["torch_rounds"]), r["heddle_s"] / r["torch_s"], extra,
                r["check"]))
        out.append("")
    dist = [r for r in rows if r["group"] == "dist"]
    if dist:
        cpu = any("heddle_cpu_s" in r for r in dist)
        out.append("| %s: run | cores | heddle | speedup over 1 device, 1 core | MPI / threads "
                   "| PyTorch, same cores | heddle / PyTorch |%s" % (
                       dist[0]["case"], " heddle CPU (all cores) |" if cpu else ""))
        out.append("|---|---|---|---|---|---|---|" + ("---|" if cpu else ""))
        for r in dist:
            if r.get("error"):
                out.append("| %s | %d | failed: %s | | | | |%s" % (r["what"], r["threads"],
                                                                  r["error"], " |" if cpu else ""))
                continue
            out.append("| %s | %d | %s | %.2fx | %s | %s | %.2f |%s" % (
                r["what"], r["threads"], fmt_spread(r["heddle_s"], r["heddle_rounds"]),
                r["speedup"], "%.2f" % r["mpi_over_threads"] if "mpi_over_threads" in r else "",
                fmt_spread(r["torch_s"], r["torch_rounds"]), r["heddle_s"] / r["torch_s"],
                " %s |" % fmt_s(r.get("heddle_cpu_s", float("nan"))) if cpu else ""))
        out.append("")
    out += done_when(rows, transformers)
    if failures:
        out.append("| case | failed |")
        out.append("|---|---|")
        for name, msg in failures:
            out.append("| %s | %s |" % (name, msg.replace("|", "/")))
        out.append("")
    return "\n".join(out)
