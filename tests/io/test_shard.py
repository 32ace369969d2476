"""Shard sets keep one schema: the parquet storage schema, recorded exactly in every manifest."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer import match_recognize
from dfs_cer.io.csvtypes import ColumnKinds, CsvError, parse_column_types
from dfs_cer.io.shard import ShardError, decode_schema, shard, storage_schema
from storage_node.store import ShardStore


def test_every_node_and_file_agrees_on_the_storage_schema(tmp_path: Path) -> None:
    t = pa.table(
        {
            "ts": pa.array([1, 2, 3], pa.timestamp("s")),
            "type": ["A", "B", "A"],
            "z": pa.array([1, 2, 3], pa.timestamp("us", tz="Europe/Paris")),
            "d": pa.array([Decimal(1), Decimal(2), Decimal(3)], pa.decimal128(30, 2)),
            "l": pa.array([[1], [], None]),
            "s": pa.array(["x", "y", "x"]).dictionary_encode(),
        }
    )
    pq.write_table(t, tmp_path / "in.parquet")
    shard(
        str(tmp_path / "in.parquet"), 4, str(tmp_path / "out")
    )  # three rows, four nodes: one is empty
    expected = storage_schema(t.schema)
    assert expected.field("ts").type == pa.timestamp("ms")  # parquet has no second timestamps
    for k in range(4):
        node = tmp_path / "out" / f"node-{k:02d}"
        doc = json.loads((node / "manifest.json").read_text())
        assert decode_schema(doc["arrow_schema"]) == expected
        for f in doc["files"]:
            assert pq.read_schema(node / f["path"]).remove_metadata() == expected
        store = ShardStore(str(node))  # the start-up check passes, empty nodes included
        assert store.schema.remove_metadata() == expected
    assert (
        sum(
            json.loads((tmp_path / "out" / f"node-{k:02d}" / "manifest.json").read_text())["rows"]
            for k in range(4)
        )
        == 3
    )


# CSV input: column types from every value, empty fields NULL, misfits named


def _flights(
    path: Path, rows: int, odd: dict[int, str] | None = None, cancelled_every: int = 0
) -> None:
    """``rows`` flights, one a minute; ``dep_time`` empty for every ``cancelled_every``-th one, and
    the text of ``odd`` (0-based row -> text) in place of some values."""
    with path.open("w") as f:
        f.write("ts,origin,dep_time\n")
        for i in range(rows):
            value = "" if cancelled_every and i % cancelled_every == 3 else str(600 + i % 900)
            f.write(f"{i * 60},{'ORD' if i % 2 else 'JFK'},{(odd or {}).get(i, value)}\n")


def _stored(out: Path, nodes: int) -> pa.Table:
    return pa.concat_tables(
        pq.read_table(out / f"node-{k:02d}" / f["path"])
        for k in range(nodes)
        for f in json.loads((out / f"node-{k:02d}" / "manifest.json").read_text())["files"]
    )


def test_a_stray_text_in_a_numeric_csv_column_is_an_error_naming_row_column_and_value(
    tmp_path: Path,
) -> None:
    _flights(tmp_path / "flights.csv", 40, odd={20: "abc"})
    with pytest.raises(
        CsvError,
        match=r"flights.csv, row 21, column dep_time: 'abc' is not int64 .*"
        r"--schema dep_time=string",
    ):
        shard(str(tmp_path / "flights.csv"), 2, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # refused before anything is written
    shard(
        str(tmp_path / "flights.csv"),
        2,
        str(tmp_path / "out"),
        column_types={"dep_time": pa.string()},
    )
    stored = _stored(tmp_path / "out", 2)
    assert (
        stored.schema.field("dep_time").type == pa.string()
        and "abc" in stored.column("dep_time").to_pylist()
    )
    with pytest.raises(
        CsvError, match=r"row 21, column dep_time: 'abc' is not int64 \(declared with --schema"
    ):
        shard(
            str(tmp_path / "flights.csv"),
            2,
            str(tmp_path / "out2"),
            column_types={"dep_time": pa.int64()},
        )


def test_empty_csv_fields_are_null_and_is_null_finds_them(tmp_path: Path) -> None:
    _flights(tmp_path / "flights.csv", 120, cancelled_every=10)  # 12 cancelled flights
    (tmp_path / "flights.csv").write_text((tmp_path / "flights.csv").read_text() + '7200,"",""\n')
    shard(str(tmp_path / "flights.csv"), 3, str(tmp_path / "out"))
    stored = _stored(tmp_path / "out", 3)
    assert stored.schema.field("dep_time").type == pa.int64()
    assert (
        stored.column("dep_time").null_count == 13
    )  # a quoted empty field is NULL in a numeric column
    assert (
        stored.column("origin").to_pylist().count("") == 1
    )  # and the empty string in a text column
    sql = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES C.ts AS at ONE ROW PER MATCH "
        "PATTERN (C) DEFINE C AS C.dep_time IS NULL)"
    )
    assert match_recognize(stored, sql).num_rows == 13


def test_a_csv_event_without_a_time_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text(
        'ts,type\n1,A\n"",B\n,C\n'
    )  # quoted or not, an empty time is NULL
    with pytest.raises(ShardError, match="2 rows of the input have no ts"):
        shard(str(tmp_path / "f.csv"), 1, str(tmp_path / "out"))


def test_csv_column_types_come_from_the_whole_file(tmp_path: Path) -> None:
    late = 200_000  # far past pyarrow's first read block
    _flights(tmp_path / "late.csv", late + 10, odd={late: "612.5"})
    shard(str(tmp_path / "late.csv"), 2, str(tmp_path / "out"))
    stored = _stored(tmp_path / "out", 2)
    assert stored.schema.field("dep_time").type == pa.float64()
    assert 612.5 in stored.column("dep_time").to_pylist()
    # one parquet file per node for the whole CSV, not one per read block
    assert [
        len(json.loads((tmp_path / "out" / f"node-{k:02d}" / "manifest.json").read_text())["files"])
        for k in range(2)
    ] == [1, 1]
    _flights(tmp_path / "stray.csv", late + 10, odd={late: "abc"})
    with pytest.raises(CsvError, match=r"row 200,001, column dep_time: 'abc' is not int64"):
        shard(str(tmp_path / "stray.csv"), 2, str(tmp_path / "out2"))


def test_csv_inference_on_mixed_columns() -> None:
    def decide(values: list[str | None]) -> pa.DataType:
        kinds = ColumnKinds("c")
        kinds.observe(pa.array(values, pa.string()), "x.csv", 0)
        return kinds.decide()

    assert decide(["1", "2", None, ""]) == pa.int64()
    assert decide(["1", "2.5", "1e3"]) == pa.float64()
    assert decide(["2026-01-05", "2026-01-05 09:30:03"]) == pa.timestamp("s")
    assert decide(["2026-01-05 09:30:03.25", "2026-01-05"]) == pa.timestamp("ns")
    assert decide(["2026-01-05T09:30:03Z", "2026-01-05T10:00:00+01:00"]) == pa.timestamp("s", "UTC")
    assert decide(["true", "False"]) == pa.bool_()
    assert decide(["A12", "B7", "9"]) == pa.string()  # mostly text: text
    assert decide([None, ""]) == pa.string()
    with pytest.raises(
        CsvError, match=r"row 3, column c: '2026-02-30' is not date32"
    ):  # looks like one, is not
        decide(["2026-01-05", "2026-01-06", "2026-02-30", "2026-01-07", "x"])
    with pytest.raises(CsvError, match=r"x.csv, row 3, column c: 'true' is not double"):
        decide(["1", "2.5", "true", "4"])


def test_csv_inference_counts_a_value_only_in_the_spelling_of_its_kind(tmp_path: Path) -> None:
    """pyarrow's cast reads more than the kinds' spellings ('0x10' as 16, '0' as false, an integer
    past int64 as a rounded double): a whole batch cast at once must not type a column by it."""

    def decide(values: list[str | None]) -> pa.DataType:
        kinds = ColumnKinds("c")
        kinds.observe(pa.array(values, pa.string()), "x.csv", 0)
        return kinds.decide()

    with pytest.raises(CsvError, match=r"row 1, column c: '0x10' is not int64"):
        decide(["0x10", "5", "7"])
    with pytest.raises(CsvError, match=r"row 3, column c: '0' is not bool"):
        decide(["true", "false", "0"])
    with pytest.raises(CsvError, match=r"row 3, column c: '12345678901234567890' is not int64"):
        decide(["1", "2", "12345678901234567890"])
    assert (
        decide(["12345678901234567890", "98765432109876543210"]) == pa.string()
    )  # kept exactly, as text
    assert (
        decide(["1234567890123456789", "-9223372036854775808", "1"]) == pa.int64()
    )  # 19 digits still fit
    assert decide(["1", "1e3", "-0", "NaN", "inf", ".5"]) == pa.float64()
    (tmp_path / "ids.csv").write_text("ts,id\n1,12345678901234567890\n2,12345678901234567891\n")
    shard(str(tmp_path / "ids.csv"), 1, str(tmp_path / "out"))
    assert _stored(tmp_path / "out", 1).column("id").to_pylist() == [
        "12345678901234567890",
        "12345678901234567891",
    ]


def test_a_csv_header_without_a_name_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text("ts,,type\n1,x,A\n")
    with pytest.raises(CsvError, match=r"f.csv: column 2 of its header has no name; name it"):
        shard(str(tmp_path / "f.csv"), 1, str(tmp_path / "out"))


def test_schema_option_parses_types(tmp_path: Path) -> None:
    assert parse_column_types(
        "a=int64, b=string\n# a comment\nc=timestamp[us, tz=Europe/Paris],d=decimal128(10, 2)"
    ) == {
        "a": pa.int64(),
        "b": pa.string(),
        "c": pa.timestamp("us", "Europe/Paris"),
        "d": pa.decimal128(10, 2),
    }
    with pytest.raises(CsvError, match="unknown type 'integer'"):
        parse_column_types("a=integer")
    with pytest.raises(CsvError, match="'float16': the CSV reader has no half floats; use float32"):
        parse_column_types("a=float16")
    with pytest.raises(CsvError, match="'a' is not COLUMN=TYPE"):
        parse_column_types("a")
    with pytest.raises(
        CsvError, match=r"'decimal128\(99, 2\)': a decimal128 has a precision of 1 to 38"
    ):
        parse_column_types("a=decimal128(99, 2)")
    with pytest.raises(
        CsvError,
        match=r"unknown time zone 'Mars/Base' in 'timestamp\[s, tz=Mars/Base\]'.*Europe/Paris",
    ):
        parse_column_types("a=timestamp[s, tz=Mars/Base]")
    assert parse_column_types("a=timestamp[s, tz=+01:00]") == {"a": pa.timestamp("s", "+01:00")}
    _flights(tmp_path / "f.csv", 4)
    with pytest.raises(
        CsvError, match=r"--schema names dep, not a column of .*columns: ts, origin, dep_time"
    ):
        shard(str(tmp_path / "f.csv"), 1, str(tmp_path / "out"), column_types={"dep": pa.int64()})
    pq.write_table(pa.table({"ts": [1]}), tmp_path / "p.parquet")
    with pytest.raises(ShardError, match="--schema applies to CSV input"):
        shard(
            str(tmp_path / "p.parquet"), 1, str(tmp_path / "out"), column_types={"ts": pa.int64()}
        )


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_an_input_read_in_small_pieces_is_sharded_into_row_groups_of_64k_rows(
    tmp_path: Path, kind: str
) -> None:
    """A CSV read block by block, a parquet file of small row groups: the shards are still one
    file per node, in row groups of 65,536 rows, not a file per piece of the input."""
    import pyarrow.csv as pcsv

    from dfs_cer.datasets.stocks import stock_events

    table = stock_events(300_000, keys=100, seed=2)
    source = tmp_path / f"ticks.{kind}"
    if kind == "csv":
        pcsv.write_csv(table, source)
    else:
        pq.write_table(table, source, row_group_size=3_000)
    manifests = shard(str(source), 2, str(tmp_path / "out"))
    for m in manifests:
        assert len(m.files) == 1
        name = str(m.files[0]["path"])
        meta = pq.ParquetFile(tmp_path / "out" / f"node-{m.node:02d}" / name).metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert sizes[:-1] == [65_536] * (len(sizes) - 1) and sum(sizes) == m.rows
    assert sum(m.rows for m in manifests) == 300_000


def test_a_missing_value_spelled_na_is_read_as_null_when_told(tmp_path: Path) -> None:
    """R writes a missing value as NA: the error says how to read it, and --null-values does."""
    _flights(tmp_path / "flights.csv", 40, odd={20: "NA"})
    with pytest.raises(CsvError, match=r"'NA' is not int64 .*read 'NA' as a missing value with "
                       r"--null-values NA"):  # fmt: skip
        shard(str(tmp_path / "flights.csv"), 2, str(tmp_path / "out"))
    shard(str(tmp_path / "flights.csv"), 2, str(tmp_path / "out"), null_values=("NA",))
    stored = _stored(tmp_path / "out", 2)
    assert stored.schema.field("dep_time").type == pa.int64()
    assert stored.column("dep_time").null_count == 1
    assert stored.column("origin").null_count == 0  # only the unquoted spelling is NULL
    with pytest.raises(ShardError, match="--null-values applies to CSV input"):
        pq.write_table(stored, tmp_path / "flights.parquet")
        shard(str(tmp_path / "flights.parquet"), 2, str(tmp_path / "p"), null_values=("NA",))


def test_the_log_is_named_and_keeps_its_name_and_identity_when_appended(tmp_path: Path) -> None:
    """The manifests name the log after the input (or ``name``) and carry one shard set identity;
    ``append`` keeps both, and refuses another name."""
    pq.write_table(pa.table({"ts": [1, 2, 3], "v": [1, 2, 3]}), tmp_path / "storms.2024.parquet")
    pq.write_table(pa.table({"ts": [4], "v": [4]}), tmp_path / "late.parquet")

    def manifests(to: str) -> list[dict[str, object]]:
        return [
            json.loads((tmp_path / to / f"node-0{i}" / "manifest.json").read_text()) for i in (0, 1)
        ]

    shard(str(tmp_path / "storms.2024.parquet"), 2, str(tmp_path / "a"))
    written = manifests("a")
    assert [m["name"] for m in written] == ["storms", "storms"]
    assert len({m["shard_set"] for m in written}) == 1
    shard(str(tmp_path / "late.parquet"), 2, str(tmp_path / "a"), append=True)
    assert [(m["name"], m["shard_set"]) for m in manifests("a")] == [
        (m["name"], m["shard_set"]) for m in written
    ]
    with pytest.raises(ShardError, match="hold the log 'storms', not 'hurricanes'"):
        shard(
            str(tmp_path / "late.parquet"), 2, str(tmp_path / "a"), append=True, name="hurricanes"
        )
    shard(str(tmp_path / "storms.2024.parquet"), 2, str(tmp_path / "b"), name="Storms")
    assert manifests("b")[0]["name"] == "Storms"
    assert manifests("b")[0]["shard_set"] != written[0]["shard_set"]
    with pytest.raises(ShardError, match=r"--name 'a\.b' cannot name a log: it holds a dot"):
        shard(str(tmp_path / "late.parquet"), 1, str(tmp_path / "c"), name="a.b")
