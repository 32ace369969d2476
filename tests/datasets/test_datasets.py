"""Data generators (synthetic variants, CRIMES-, CITIBIKE-, CLUSTER-shaped), their workloads,
and the loaders of the real public files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import analyze, match_recognize, parse
from dfs_cer.datasets.citibike import citibike_queries
from dfs_cer.datasets.cluster import cluster_queries
from dfs_cer.datasets.crimes import crimes_queries
from dfs_cer.datasets.generate import batches, write_parquet
from dfs_cer.datasets.loaders import (
    LoadError,
    load_chicago_crimes,
    load_citibike,
    load_google_cluster,
)
from dfs_cer.datasets.synthetic import INTERARRIVALS, synthetic_events
from dfs_cer.errors import ConfigError


@pytest.mark.parametrize("interarrival", INTERARRIVALS)
def test_synthetic_interarrivals_have_mean_one_second(interarrival: str) -> None:
    t = synthetic_events(50_000, interarrival=interarrival)
    ts = np.sort(t.column("ts").cast(pa.int64()).to_numpy())
    gaps = np.diff(ts) / 1000.0
    assert abs(gaps.mean() - 1.0) < 0.03 and gaps.min() >= 0
    if interarrival == "uniform":
        assert gaps.max() <= 2.0
    share = t.column("type").to_pylist().count("T_00") / t.num_rows
    assert 0.33 < share < 0.37  # Zipf(1.2) over 20 types
    assert not np.all(
        np.diff(t.column("ts").cast(pa.int64()).to_numpy()) >= 0
    )  # shuffled: out of order


def test_generated_parquet_streams_in_batches(tmp_path: Path) -> None:
    out = tmp_path / "s.parquet"
    assert write_parquet("synthetic", 25_000, str(out), batch=10_000) == 25_000
    assert pq.ParquetFile(out).metadata.num_rows == 25_000
    with pytest.raises(ConfigError, match="interarrival must be one of"):
        list(batches("synthetic", 10, interarrival="pareto"))
    with pytest.raises(ConfigError, match="data set must be one of"):
        list(batches("weather", 10))


@pytest.mark.parametrize(
    ("kind", "queries", "n"),
    [
        ("crimes", crimes_queries, 60_000),
        ("citibike", citibike_queries, 300_000),
        ("cluster", cluster_queries, 60_000),
    ],
)
def test_shaped_generators_and_workloads(kind: str, queries: object, n: int) -> None:
    table = pa.concat_tables(batches(kind, n, batch=n // 3 + 1))
    assert table.num_rows == n
    time_col = table.schema.names[-1] if kind != "crimes" else "date"
    ts = table.column(time_col).cast(pa.int64()).to_numpy()
    assert np.all(np.diff(ts) >= 0)  # time order
    sqls = queries(6)  # type: ignore[operator]
    assert len(set(sqls)) >= 4  # the reference workloads repeat some queries too
    for sql in sqls:
        analyze(parse(sql), table.schema)  # binds to the generator's schema
    found = sum(match_recognize(table, sql).num_rows for sql in sqls)
    assert found > 0, kind


CRIMES_CSV = (
    "ID,Case Number,Date,Block,IUCR,Primary Type,Description,Location Description,Arrest,"
    "Domestic,Beat,District,Ward,Community Area,FBI Code,X Coordinate,Y Coordinate,Year,"
    "Updated On,Latitude,Longitude,Location\n"
    "13664891,JH100001,01/05/2024 06:45:00 PM,0000X W MADISON ST,031A,ROBBERY,ARMED,STREET,"
    "false,false,0111,1,42,32,03,1176000,1900000,2024,01/10/2024,41.88,-87.63,"
    '"(41.88, -87.63)"\n'
    "13665019,JH100002,01/05/2024 06:50:30 AM,0000X W MADISON ST,0910,MOTOR VEHICLE THEFT,"
    "AUTO,STREET,false,false,1411,14,1,22,07,1160000,1910000,2024,01/10/2024,41.91,-87.70,"
    '"(41.91, -87.70)"\n'
    "13665020,JH100003,01/05/2024 07:00:00 PM,0000X W MADISON ST,0486,BATTERY,SIMPLE,STREET,"
    "false,false,0111,1,42,32,08B,,,2024,01/10/2024,,,\n"
)


def test_load_chicago_crimes(tmp_path: Path) -> None:
    src = tmp_path / "crimes.csv"
    src.write_text(CRIMES_CSV)
    result = load_chicago_crimes([str(src)], str(tmp_path / "c.parquet"))
    assert (result.rows, result.dropped) == (2, 1)  # the battery has no coordinates
    rows = pq.read_table(tmp_path / "c.parquet").to_pylist()
    assert (
        rows[0]["primary_type"] == "ROBBERY" and rows[0]["beat"] == 111 and rows[0]["district"] == 1
    )
    assert (
        str(rows[0]["date"]) == "2024-01-05 18:45:00"
        and str(rows[1]["date"]) == "2024-01-05 06:50:30"
    )
    bad = tmp_path / "bad.csv"
    bad.write_text(CRIMES_CSV.replace("01/05/2024 06:45:00 PM", "2024-01-05T18:45"))
    with pytest.raises(LoadError, match="Date values are not MM/DD/YYYY"):
        load_chicago_crimes([str(bad)], str(tmp_path / "x.parquet"))
    partial = tmp_path / "partial.csv"
    partial.write_text("ID,Date\n1,01/05/2024 06:45:00 PM\n")
    with pytest.raises(LoadError, match="has no column"):
        load_chicago_crimes([str(partial)], str(tmp_path / "y.parquet"))


CITIBIKE_CSV = (
    "ride_id,rideable_type,started_at,ended_at,start_station_name,start_station_id,"
    "end_station_name,end_station_id,start_lat,start_lng,end_lat,end_lng,member_casual\n"
    "5E1B1D0A8C3F2B11,classic_bike,2023-06-01 08:00:00,2023-06-01 08:03:00,A,6140.05,B,"
    "6173.08,40.74,-73.99,40.75,-73.98,member\n"
    "FFFFFFFFFFFFFFFF,electric_bike,2023-06-01 08:01:00,2023-06-01 08:13:00,B,6173.08,C,"
    "5905.12,40.75,-73.98,40.73,-73.99,casual\n"
    "0000000000000001,electric_bike,2023-06-01 08:02:00,2023-06-01 09:13:00,B,,C,5905.12,"
    "40.75,-73.98,40.73,-73.99,casual\n"
)


def test_load_citibike(tmp_path: Path) -> None:
    src = tmp_path / "trips.csv"
    src.write_text(CITIBIKE_CSV)
    result = load_citibike([str(src)], str(tmp_path / "b.parquet"))
    assert (result.rows, result.dropped) == (
        2,
        0,
    )  # the trip without a start station was dropped early
    rows = pq.read_table(tmp_path / "b.parquet").to_pylist()
    assert [r["type"] for r in rows] == ["A", "L"]  # 3 min classic member; 12 min electric casual
    assert rows[0]["start_station_id"] == 614005 and rows[0]["end_station_id"] == 617308
    assert rows[0]["ride_id"] == 0x5E1B1D0A8C3F2B11 and rows[1]["ride_id"] == -1


def test_loaders_read_only_their_columns_each_of_its_type(tmp_path: Path) -> None:
    """No column type is inferred from a first block: a stray value in a used column is an error
    naming its row and value (it made start_lat text and the load an internal error), one in an
    unused column is not read at all."""
    src = tmp_path / "trips.csv"
    second = "40.75,-73.98,40.73,-73.99,casual\n0000"  # the end of the second trip
    src.write_text(CITIBIKE_CSV.replace(second, "abc" + second[5:]))
    with pytest.raises(LoadError, match=r"trips.csv, row 2, column start_lat: 'abc' is not double"):
        load_citibike([str(src)], str(tmp_path / "b.parquet"))
    src.write_text(
        CITIBIKE_CSV.replace(",A,6140.05,", ",7,6140.05,")
    )  # an unused column, number then text
    assert load_citibike([str(src)], str(tmp_path / "b.parquet")).rows == 2
    partial = tmp_path / "partial.csv"
    partial.write_text("ride_id,started_at\nX,2023-06-01 08:00:00\n")
    with pytest.raises(LoadError, match=r"has no column.*rideable_type"):
        load_citibike([str(partial)], str(tmp_path / "p.parquet"))


def test_load_google_cluster(tmp_path: Path) -> None:
    src = tmp_path / "part-00000-of-00500.csv"
    src.write_text(
        "600000000,,3418309,0,,0,user,3,9,0.125,0.07446,0.0004244,\n"
        "600000100,,3418309,0,1,1,user,3,9,0.125,0.07446,0.0004244,0\n"
        "600000200,,3418309,1,1,4,user,3,9,,0.07446,0.0004244,0\n"
    )
    result = load_google_cluster([str(src)], str(tmp_path / "g.parquet"))
    assert (result.rows, result.dropped) == (2, 1)
    rows = pq.read_table(tmp_path / "g.parquet").to_pylist()
    assert [r["type"] for r in rows] == ["TP0", "TP1"] and rows[0]["jobid"] == 3418309
    assert rows[1]["eventtime"].timestamp() == pytest.approx(600.0001, abs=1e-6)


def test_cli_generate_and_load(tmp_path: Path) -> None:
    exe = str(Path(sys.executable).parent / "dfs-cer")
    out = subprocess.run(
        [
            exe,
            "--output",
            "json",
            "generate",
            "cluster",
            "--events",
            "5000",
            "--out",
            str(tmp_path / "c.parquet"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert pq.ParquetFile(tmp_path / "c.parquet").metadata.num_rows == 5000
    bad = subprocess.run(
        [
            exe,
            "generate",
            "crimes",
            "--events",
            "10",
            "--interarrival",
            "uniform",
            "--out",
            str(tmp_path / "x.parquet"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "--interarrival applies to synthetic data only" in bad.stderr
    src = tmp_path / "crimes.csv"
    src.write_text(CRIMES_CSV)
    loaded = subprocess.run(
        [exe, "--output", "json", "load", "crimes", str(src), "--out", str(tmp_path / "l.parquet")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.returncode == 0 and '"rows": 2' in loaded.stdout
