"""spark-submit job: run a MATCH_RECOGNIZE query with dfs-cer and write the matches as parquet.

    spark-submit spark_jobs/run_query.py --sql <file|text>
        (--endpoints h:p,... --token-file F | --data PATH) --output <dir|s3://bucket/prefix>
        [--strategy dfs] [--cost-model adaptive] [--explain-analyze]
        [--verbose]   (Spark's log; errors only by default)

Writes ``<output>/matches.parquet`` and ``<output>/trace.json`` (the pull's round trips; empty for
``--data``). Exit code 0 on success, 2 with a one-line error on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dfs_cer.errors import DfsCerError


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="run_query.py", description=__doc__.splitlines()[0])
    p.add_argument("--sql", required=True, help="the query text, or a file holding it")
    p.add_argument("--endpoints", help="comma-separated storage node endpoints")
    p.add_argument("--token-file", help="file holding the storage nodes' token")
    p.add_argument(
        "--data", help="parquet file or directory for Spark to read instead of storage nodes"
    )
    p.add_argument("--output", required=True, help="output directory, local or s3://bucket/prefix")
    # default: the settings' (DFS_CER_CONFIG, DFS_CER__STRATEGY__DEFAULT / __COST_MODEL)
    p.add_argument("--strategy", default=None)
    p.add_argument("--cost-model", default=None)
    p.add_argument("--driver-threshold", type=int, default=100_000)
    p.add_argument("--explain-analyze", action="store_true", help="print the round trips to stderr")
    p.add_argument(
        "--verbose", action="store_true", help="show Spark's log (errors only by default)"
    )
    return p.parse_args(argv)


def sql_text(arg: str) -> str:
    """``--sql``: the text of the file it names, else the query text itself (text of any length,
    even longer than a file name may be)."""
    from dfs_cer.io.files import names_a_file, read_text_file

    return read_text_file(arg, "--sql file") if names_a_file(arg) else arg


def _write(output: str, matches: Any, trace: dict[str, Any]) -> None:
    import pyarrow.parquet as pq

    from dfs_cer.config import load_config
    from dfs_cer.io.files import filesystem_for

    where = filesystem_for(output, load_config().storage)
    if not output.startswith("s3://"):
        where.fs.create_dir(where.path, recursive=True)
    with where.fs.open_output_stream(where.join("matches.parquet")) as f:
        pq.write_table(matches, f)
    with where.fs.open_output_stream(where.join("trace.json")) as f:
        f.write(json.dumps(trace, indent=2, default=str).encode())


def run(argv: list[str]) -> int:
    args = _parse(argv)
    from dfs_cer.errors import ConfigError
    from dfs_cer.query import parse
    from dfs_cer.spark import local_session

    sql = sql_text(args.sql)
    parse(sql)  # bad SQL fails before Spark starts
    if bool(args.endpoints) == bool(args.data):
        raise ConfigError("give --endpoints and --token-file, or --data (not both)")
    token = None
    if args.endpoints:
        if not args.token_file:
            raise ConfigError("--endpoints needs --token-file (the storage nodes' token)")
        from dfs_cer.io.files import read_text_file

        token = read_text_file(args.token_file, "--token-file").strip()
    # errors only unless --verbose: spark.log.level applies from the SparkContext's start (the
    # venv's pyspark also carries a quiet log4j2 profile, see the Makefile,
    # for the JVM's first lines)
    level: dict[str, Any] = {"spark.log.level": "INFO" if args.verbose else "ERROR"}
    spark = local_session(**level)
    try:
        return _recognized(spark, args, sql, token)
    finally:
        spark.stop()  # a cluster's executors end with the job, not at the JVM's shutdown


def _recognized(spark: Any, args: argparse.Namespace, sql: str, token: str | None) -> int:
    from dfs_cer.spark import recognize

    options: dict[str, Any] = (
        {"cost_model": args.cost_model} if args.endpoints and args.cost_model else {}
    )
    run = recognize(
        spark,
        sql,
        endpoints=args.endpoints.split(",") if args.endpoints else None,
        token=token,
        data=args.data,
        strategy=args.strategy,
        driver_threshold=args.driver_threshold,
        **options,
    )
    trace: dict[str, Any] = run.trace.to_dict() if run.trace else {}
    if run.split is not None:  # how the executors split the input
        from dataclasses import asdict

        trace["split"] = asdict(run.split)
    matches = run.matches.toArrow()
    _write(args.output, matches, trace)
    if args.explain_analyze and run.split is not None:
        s = run.split
        print(
            f"executors: {s.chunks} chunk(s) "
            f"({s.mode}{': ' + s.reason if s.reason else ''}), {s.reruns} re-run(s), the "
            f"driver collected {s.driver_rows} report row(s)",
            file=sys.stderr,
        )
    if args.explain_analyze and trace.get("rounds"):
        for r in trace["rounds"]:
            print(
                f"{r['action']:<16}{r['bytes_to_sn']:>12,}{r['bytes_to_cn']:>12,}{r['events']:>10,}",
                file=sys.stderr,
            )
    print(f"{matches.num_rows} matches written to {args.output.rstrip('/')}/matches.parquet")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except DfsCerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a Spark job failed: its executor's cause, in one line
        from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
        from pyspark.errors import PySparkException

        if not isinstance(e, PySparkException | Py4JJavaError):
            raise
        from dfs_cer.spark.distributed import failure_cause

        cause = failure_cause(str(e)) or type(e).__name__
        print(f"error: the Spark job failed: {cause}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
