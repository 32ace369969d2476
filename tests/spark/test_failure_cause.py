"""A failed Spark job's real cause in one line: the executor's Python error inside Spark's
Java stack traces."""

from __future__ import annotations

from dfs_cer.spark.distributed import failure_cause

WRAPPED = """py4j.protocol.Py4JJavaError: An error occurred while calling o41.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 failed
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/venv/pyspark/worker.py", line 1247, in main
    process()
  File "/repo/dfs_cer/spark/match.py", line 290, in load
    table = table.cast(schema)
pyarrow.lib.ArrowInvalid: Failed to parse string: 'abc' as a scalar of type int64
\tat org.apache.spark.api.python.BasePythonRunner.handle(PythonRunner.scala:572)
Caused by: java.lang.RuntimeException: boom
"""


def test_the_executor_s_python_error_is_the_cause() -> None:
    assert failure_cause(WRAPPED) == (
        "ArrowInvalid: Failed to parse string: 'abc' as a scalar of type int64"
    )


def test_without_a_python_error_the_first_java_one() -> None:
    text = "org.apache.spark.SparkException: Job aborted\nCaused by: java.io.IOException: disk"
    assert failure_cause(text) == "SparkException: Job aborted"
    assert failure_cause("nothing useful") is None
