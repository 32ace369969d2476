"""``make demo``: the main job on the embedded default.

Generates a CRIMES-shaped sample (once), shards it over three storage nodes started on loopback,
runs the paper's query Q1 and variants through a local Spark session with each strategy, checks
that every strategy returns the same matches, prints them and a table of bytes, events and
seconds per strategy, and stops the nodes.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dfs_cer.cli.output import Output
from dfs_cer.config import Config
from dfs_cer.errors import DfsCerError

DEFAULT_STRATEGIES = ("push_down", "push_pull", "dfs")


class DemoError(DfsCerError):
    """The demo found strategies disagreeing (a bug: please report it)."""


@dataclass
class Run:
    query: str
    strategy: str
    matches: int
    bytes_to_cn: int
    bytes_to_sn: int
    events: int
    seconds: float
    fallback: str | None
    #: the seconds in the filtering rounds and in the final pull (each with the compute node's
    #: work before it); the rest of ``seconds`` is matching (through Spark) and collecting
    rounds: float = 0.0
    pull: float = 0.0


@contextmanager
def _step(console: Console, text: str) -> Any:
    started = time.perf_counter()
    with console.status(text):
        yield
    console.print(f"{text} done in {time.perf_counter() - started:.1f} s", highlight=False)


def _identity(batches: Any) -> Any:
    yield from batches


def _rows(table: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def run_demo(
    output: Output,
    config: Config,
    *,
    events: int = 1_000_000,
    data_dir: str = "data/demo",
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES,
    queries: dict[str, str] | None = None,
    nodes: int = 3,
    show: int = 5,
) -> list[Run]:
    from dfs_cer.datasets.crimes import QUERIES
    from dfs_cer.io.samples import crimes_sample
    from dfs_cer.phases import split
    from dfs_cer.spark import local_session, recognize
    from dfs_cer.strategies import STRATEGIES
    from storage_node.launcher import LocalCluster

    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        from dfs_cer.errors import ConfigError

        raise ConfigError(f"unknown strategy {unknown[0]!r}; choose from {', '.join(STRATEGIES)}")
    queries = queries or QUERIES
    console = Console(stderr=True, highlight=False)
    with Progress(
        TextColumn("{task.description:<11}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def progress(step: str, done: int, total: int) -> None:
            if step not in tasks:
                tasks[step] = bar.add_task(step, total=total)
            bar.update(tasks[step], completed=done)

        sample = crimes_sample(
            data_dir, events=events, nodes=nodes, config=config.storage, progress=progress
        )
    console.print(
        f"{'generated' if sample.generated else 'reusing'} {sample.events:,} CRIMES-shaped events: "
        f"{sample.log}, {nodes} shard sets under {data_dir.rstrip('/')}/shards"
    )
    runs: list[Run] = []
    cluster = LocalCluster(sample.shards)
    with _step(console, f"starting {nodes} storage nodes on loopback"):
        cluster.start()
    try:
        with _step(console, "starting Spark (local[2]) and its Python workers"):
            spark = local_session()
            spark.sparkContext.setLogLevel("ERROR")
            spark.range(4, numPartitions=2).mapInArrow(
                _identity, "id long"
            ).count()  # first-job start-up
        options: dict[str, Any] = {"config": config}
        for title, sql in queries.items():
            results = {}
            for strategy in strategies:
                with console.status(f"{title}: {strategy}"):
                    started = time.perf_counter()
                    run = recognize(
                        spark,
                        sql,
                        endpoints=cluster.endpoints,
                        token=cluster.token,
                        strategy=strategy,
                        **options,
                    )
                    table = run.matches.toArrow()
                    seconds = time.perf_counter() - started
                assert run.trace is not None
                results[strategy] = table
                phases = split([r.to_dict() for r in run.trace.rounds], None, wall=seconds)
                runs.append(
                    Run(
                        title,
                        strategy,
                        table.num_rows,
                        run.trace.bytes_to_cn,
                        run.trace.bytes_to_sn,
                        run.trace.events_received,
                        seconds,
                        run.trace.fallback,
                        phases["rounds"],
                        phases["pull"],
                    )
                )
            reference = _rows(results[strategies[0]])
            for strategy in strategies[1:]:
                if _rows(results[strategy]) != reference:
                    raise DemoError(
                        f"{title}: {strategy} returned {results[strategy].num_rows} matches, "
                        f"{strategies[0]} {len(reference)}; every strategy must agree"
                    )
            shown = results[strategies[-1]]
            output.message(
                f"\n=== {title}: {shown.num_rows:,} matches, the same with "
                f"{', '.join(strategies)} ==="
            )
            output.message(sql)
            output.table(
                f"first {min(show, shown.num_rows)} matches", shown.slice(0, show).to_pylist()
            )
    finally:
        cluster.stop()
        cluster.tmp.cleanup()
    output.table(
        "\nbytes, events and seconds per strategy (seconds = rounds + pull + matching through "
        "Spark)",
        _summary(runs),
    )
    output.message(_headline(runs))
    return runs


def _summary(runs: list[Run]) -> list[dict[str, Any]]:
    base = {r.query: r.bytes_to_cn for r in runs if r.strategy == "push_down"}
    out = []
    for r in runs:
        row: dict[str, Any] = {
            "query": r.query,
            "strategy": r.strategy + (" (fallback)" if r.fallback else ""),
            "matches": r.matches,
            "to CN (B)": r.bytes_to_cn,
            "to SN (B)": r.bytes_to_sn,
            "events": r.events,
            "seconds": round(r.seconds, 2),
            "rounds": round(r.rounds, 2),
            "pull": round(r.pull, 2),
            "matching": round(max(0.0, r.seconds - r.rounds - r.pull), 2),
        }
        if base:
            row["vs push_down"] = round(r.bytes_to_cn / max(1, base.get(r.query, 0)), 3)
        out.append(row)
    return out


def _headline(runs: list[Run]) -> str:
    totals: dict[str, int] = {}
    for r in runs:
        totals[r.strategy] = totals.get(r.strategy, 0) + r.bytes_to_cn + r.bytes_to_sn
    parts = [f"{s} {b / 1e6:,.1f} MB" for s, b in totals.items()]
    line = "network bytes, all queries: " + ", ".join(parts)
    if "dfs" in totals and "push_down" in totals:
        line += f" (DFS moves {1 - totals['dfs'] / totals['push_down']:.0%} less than push-down"
        if "push_pull" in totals:
            line += f", {1 - totals['dfs'] / totals['push_pull']:.0%} less than push-pull"
        line += ")"
    return line
