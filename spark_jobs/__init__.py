"""spark-submit entry points and the Spark glue (the compute node as a Spark driver)."""
