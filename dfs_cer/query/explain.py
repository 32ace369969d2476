"""EXPLAIN for a query: the analysis as a plain dict (JSON) or as lines of text."""

from __future__ import annotations

from typing import Any

from dfs_cer.pattern.ir import to_text
from dfs_cer.query.analyze import Analysis, Role
from dfs_cer.query.arrow_filter import is_fully_pushable, to_arrow_filter
from dfs_cer.query.expr import to_sql

_ROLE_NOTE = {
    Role.HEAD: "head: first row of every match, interval [t, t+w]",
    Role.TAIL: "tail: last row of every match, interval [t-w, t]",
    Role.MIDDLE: "middle: in every match, interval [t-w, t+w]",
    Role.OPTIONAL: "optional: not in every match, cannot shrink intervals",
    Role.ANY_ROW: "any row: no condition, ignored by the filters",
}


def _window_text(analysis: Analysis) -> str | None:
    window = analysis.query.recognize.window
    if window is None:
        return None
    text = window.sql().removeprefix("WITHIN ")
    if window.months is not None:
        seconds = window.seconds()
        assert seconds is not None
        days = int(seconds // 86400)
        return (
            f"{text}: calendar months from the first row's time (time ranges on storage nodes "
            f"use at most {days} days)"
        )
    if analysis.window_units is not None:
        unit = (
            analysis.window_unit
            if analysis.window_unit != "raw"
            else "units of " + analysis.order_column
        )
        text += f" = {analysis.window_units} {unit}"
    else:
        seconds = window.seconds()
        if seconds is not None:
            text += f" = {seconds.normalize():f} s"
    return text


def explain_dict(analysis: Analysis) -> dict[str, Any]:
    """The analysis as JSON-ready data."""
    q = analysis.query
    mr = q.recognize
    return {
        "table": q.table,
        "alias": q.alias,
        "partition_by": list(mr.partition_by),
        "order_by": analysis.order_column,
        "window": _window_text(analysis),
        "window_units": analysis.window_units,
        "pattern": to_text(mr.pattern),
        "output": mr.rows_per_match.value + (" (ALL MATCHES)" if mr.all_matches else ""),
        "after_match_skip": mr.after_match_skip.sql(),
        "variables": [
            {
                "name": v.name,
                "role": v.role.value,
                "independent": None if v.independent is None else to_sql(v.independent),
                "pushed_filter": None
                if v.independent is None
                else str(to_arrow_filter(v.independent)),
                "fully_pushed": is_fully_pushable(v.independent),
                "equalities": [e.sql() for e in v.equalities],
                "residuals": [to_sql(r) for r in v.residuals],
            }
            for v in analysis.variables
        ],
        "equalities": [e.sql() for e in analysis.equalities],
        "interval_pruning": analysis.interval_pruning,
        "interval_pruning_reason": analysis.pruning_reason,
        "rows_between_variables_skippable": analysis.skippable,
        "skip_reason": analysis.skip_reason,
        "physical_navigation_reach": {"prev": analysis.prev_reach, "next": analysis.next_reach},
        "outer": {
            "select": list(q.outer.select),
            "where": q.outer.where,
            "order_by": list(q.outer.order_by),
            "limit": q.outer.limit,
        },
    }


def explain_lines(analysis: Analysis) -> list[str]:
    """Human-readable EXPLAIN, one line per fact."""
    d = explain_dict(analysis)
    out = [f"MATCH_RECOGNIZE over {d['table']}" + (f" AS {d['alias']}" if d["alias"] else "")]
    if d["partition_by"]:
        out.append(f"  partition by: {', '.join(d['partition_by'])}")
    out.append(f"  order by:     {d['order_by']}")
    out.append(f"  window:       {d['window'] or 'none (no WITHIN)'}")
    out.append(f"  pattern:      {d['pattern']}")
    out.append(f"  output:       {d['output']}; {d['after_match_skip']}")
    out.append("variables:")
    for v in d["variables"]:
        out.append(f"  {v['name']}: {_ROLE_NOTE[next(r for r in Role if r.value == v['role'])]}")
        if v["independent"]:
            pushed = "pushed to storage" if v["fully_pushed"] else "partly pushed to storage"
            out.append(f"      independent ({pushed}): {v['independent']}")
        for e in v["equalities"]:
            out.append(f"      equality (window-wise join filter): {e}")
        for r in v["residuals"]:
            out.append(f"      residual (matcher only): {r}")
    out.append("pruning:")
    if d["interval_pruning"]:
        out.append("  time intervals: yes (dual filtering can shrink the interval set)")
    else:
        out.append(
            f"  time intervals: no ({d['interval_pruning_reason']}); falls back to push-down"
        )
    if d["rows_between_variables_skippable"]:
        out.append("  rows pulled:    candidate rows only (rows between variables may be skipped)")
    else:
        out.append(f"  rows pulled:    every row inside the intervals ({d['skip_reason']})")
    reach = d["physical_navigation_reach"]
    if reach["prev"] or reach["next"]:
        out.append(
            f"  halo:           {reach['prev']} row(s) before and {reach['next']} after "
            "each interval (PREV/NEXT)"
        )
    outer = d["outer"]
    out.append(
        f"outer query:    SELECT {', '.join(outer['select'])}"
        + (f" WHERE {outer['where']}" if outer["where"] else "")
        + (f" ORDER BY {', '.join(outer['order_by'])}" if outer["order_by"] else "")
        + (f" LIMIT {outer['limit']}" if outer["limit"] is not None else "")
    )
    return out
