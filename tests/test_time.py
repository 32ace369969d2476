"""Times in messages, summaries and tables are written in the time column's own type."""

from __future__ import annotations

import pyarrow as pa

from dfs_cer.events.time import moment


def test_a_stored_time_is_written_in_its_column_s_type() -> None:
    assert moment(1357017300000, pa.timestamp("ms")) == "2013-01-01 05:15:00.000"
    assert moment(1385866800000000, pa.timestamp("us", tz="UTC")) == "2013-12-01 03:00:00.000000Z"
    assert moment(15706, pa.date32()) == "2013-01-01"
    assert moment(1357017300, pa.int64()) == 1357017300  # an integer time column stays one
    assert moment(None, pa.timestamp("s")) is None
