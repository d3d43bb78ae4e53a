#!/usr/bin/env python3
"""Summarises an et Perfetto trace (`llama_bench --trace DIR`) per tile group.

For one layer (default 5; tasks whose first index is the layer) and for the groups
without a layer index, prints per group: task count, span (first start to last end),
median and max work (end - ready: after the last wait), median wait, and the groups'
order on the critical path by their first ready time.

    python3 trace_summary.py TRACE.json [--layer 5]
"""
import json
import statistics
import sys
from collections import defaultdict


def main():
    path = sys.argv[1]
    layer = int(sys.argv[sys.argv.index("--layer") + 1]) if "--layer" in sys.argv else 5
    events = json.load(open(path))["traceEvents"]
    tasks = [e for e in events if e.get("ph") == "X" and e.get("cat") != "et.wait"]
    waits = {(e["tid"], round(e["ts"], 3)): e["dur"] for e in events if e.get("ph") == "X" and e.get("cat") == "et.wait"}
    groups = defaultdict(list)
    for t in tasks:
        name = t["name"]
        group, _, idx = name.partition("[")
        idx = [int(x) for x in idx.rstrip("]").split(",") if x.strip().lstrip("-").isdigit()]
        layered = group not in ("emb", "angles", "final_norm_row", "head", "pick")
        if layered and (not idx or idx[0] != layer):
            continue
        wait = waits.get((t["tid"], round(t["ts"], 3)), 0.0)
        groups[group].append((t["ts"], t["ts"] + wait, t["ts"] + t["dur"], wait))
    total_end = max(t["ts"] + t["dur"] for t in tasks)
    total_start = min(t["ts"] for t in tasks)
    print(f"{path}: {len(tasks)} tasks, {total_end - total_start:.1f} us; layer {layer}")
    print(f"{'group':16} {'tasks':>6} {'first ready':>12} {'last end':>10} {'span':>8} {'work med':>9} {'work max':>9} {'wait med':>9}")
    for g, rows in sorted(groups.items(), key=lambda kv: min(r[1] for r in kv[1])):
        first_ready = min(r[1] for r in rows)
        last_end = max(r[2] for r in rows)
        work = [r[2] - r[1] for r in rows]
        wait = [r[3] for r in rows]
        print(
            f"{g:16} {len(rows):6d} {first_ready - total_start:12.1f} {last_end - total_start:10.1f} "
            f"{last_end - first_ready:8.1f} {statistics.median(work):9.2f} {max(work):9.2f} {statistics.median(wait):9.2f}"
        )


if __name__ == "__main__":
    main()
