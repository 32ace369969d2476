"""A local SparkSession configured for dfs-cer (tests, the CLI and the demo)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from dfs_cer import interrupt
from dfs_cer.config import Config

P = ParamSpec("P")
R = TypeVar("R")


def submitted() -> bool:
    """Is this Python process a spark-submit application (its JVM already running)?"""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def local_session(
    cores: int = 2, app_name: str = "dfs-cer", master: str | None = None, **conf: Any
) -> Any:
    """``local[cores]`` Spark with Arrow transfers on, the UI off and few shuffle partitions
    (under spark-submit: the master it was given; ``master`` picks another, e.g.
    ``local-cluster[2,1,1024]``: a master, two workers and executor JVMs in this machine).

    Python workers run this interpreter, so executors import the same dfs_cer. The ``dfs_cer``
    data source (:mod:`dfs_cer.spark.source`) is registered.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode: no hostname lookup warning
    log4j = Path(__file__).with_name("log4j2.properties").as_uri()
    builder = SparkSession.builder
    if master and master.startswith("local-cluster"):
        import pyspark

        # the workers start executors with SPARK_HOME's scripts: pip's pyspark carries them
        os.environ.setdefault("SPARK_HOME", str(Path(pyspark.__file__).parent))
        # executors import dfs_cer from this checkout
        root = str(Path(__file__).resolve().parents[2])
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in [root, os.environ.get("PYTHONPATH", "")] if p
        )
    if master:
        builder = builder.master(master)
    elif (
        not submitted()
    ):  # under spark-submit its --master (local, local-cluster, spark://...) stands
        builder = builder.master(f"local[{cores}]")
    builder = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        # ${env:...}, ${system:...}, ${spark...} in SQL text would read the driver's secrets
        .config("spark.sql.variable.substitute", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, cores * 2)))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
        .config("spark.driver.memory", "2g")
    )
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    session = builder.getOrCreate()
    from dfs_cer.spark.source import DfsCerSource

    # format("dfs_cer") / USING dfs_cer: an installed dfs-cer is found by name anyway; an
    # editable install (a checkout) is not listed to Spark's lookup
    session.dataSource.register(DfsCerSource)
    return session


#: seconds between two cancellations of the session's jobs after Ctrl-C
CANCEL_EVERY = 0.25


@contextlib.contextmanager
def cancelling(spark: Any) -> Iterator[None]:
    """Ctrl-C inside the block stops the driver's work (:mod:`dfs_cer.interrupt`) and cancels
    the session's Spark jobs, then raises ``KeyboardInterrupt`` (the storage nodes' queries are
    closed on the way out, as on any failure). Jobs are cancelled again every
    :data:`CANCEL_EVERY` seconds until the block ends: the driver may be between two jobs,
    inside a call into the JVM that starts the next one."""
    ended = threading.Event()
    context = spark.sparkContext

    def cancel() -> None:
        while True:
            with contextlib.suppress(Exception):  # (a stopped session has nothing to cancel)
                context.cancelAllJobs()
            if ended.wait(CANCEL_EVERY):
                return

    def start() -> None:
        threading.Thread(target=cancel, name="dfs-cer cancel jobs", daemon=True).start()

    try:
        with interrupt.interruptible(), interrupt.on_trip(start):
            try:
                yield
            except Exception:
                interrupt.check()  # a job Ctrl-C cancelled: KeyboardInterrupt, not its error
                raise
            interrupt.check()
    finally:
        ended.set()


def cancels_jobs(func: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """``func(spark, ...)`` run inside :func:`cancelling` (the Spark entry points)."""

    @functools.wraps(func)
    def wrapper(spark: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with cancelling(spark):
            return func(spark, *args, **kwargs)

    return wrapper


def sandboxed_sql(
    spark: Any, sql: str, relations: Iterable[str], config: Config | None = None
) -> Any:
    """``spark.sql(sql)`` after the outer-query sandbox (:mod:`dfs_cer.query.sandbox`): Spark SQL
    has no switch that keeps a query to its views (it runs script transforms and JVM methods as
    the driver's user), so every statement dfs-cer hands it passes the check first.

    The statement runs in a session of its own (:meth:`SparkSession.newSession`) that holds only
    ``relations``, with the caller's SQL settings: Spark reads a name no column has as a session
    variable, and the application's (``DECLARE VARIABLE secret ...``), its other views and its
    functions live in the caller's session, out of the statement's reach. The relations travel
    as global temporary views of random names, dropped once the session holds them. Its
    string-building calls are bounded (:func:`dfs_cer.spark.outer.guarded`, by ``config``'s
    ``query.outer_memory_limit``; default: the loaded settings'); it runs when an
    action asks for its rows (:func:`dfs_cer.spark.outer.computed` runs it by a deadline)."""
    import uuid

    from dfs_cer.query.sandbox import check_outer
    from dfs_cer.spark.outer import guarded

    names = list(relations)
    check_outer(sql, names, "spark")
    isolated = spark.newSession()
    for key, value in spark.conf.getAll.items():  # time zone, ANSI mode, ... as the caller set them
        if key.startswith("spark.sql.") and isolated.conf.isModifiable(key):
            isolated.conf.set(key, value)
    for name in names:
        tag = f"dfs_cer_{uuid.uuid4().hex}"
        spark.table(_quoted(name)).createGlobalTempView(tag)
        try:
            isolated.table(f"global_temp.{tag}").createOrReplaceTempView(name)
        finally:
            spark.catalog.dropGlobalTempView(tag)
    try:
        return isolated.sql(guarded(isolated, sql, config))
    except Exception as exc:  # analysis errors: a name the relations do not have, a wrong type
        from pyspark.errors import AnalysisException

        if not isinstance(exc, AnalysisException):
            raise
        from dfs_cer.errors import QueryValidationError

        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise QueryValidationError(
            f"the outer query does not run on Spark SQL: {first}", clause="SELECT", code="outer"
        ) from None


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
