"""A CSV value is kept exactly or refused naming its row and value: at the edges of every type
the columns are inferred as (and of the types ``--schema`` declares)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dfs_cer.io.csvtypes import ColumnKinds, CsvError, convert
from dfs_cer.io.shard import shard


def decide(values: list[str]) -> pa.DataType:
    kinds = ColumnKinds("v")
    kinds.observe(pa.array(values, pa.string()), "x.csv", 0)
    return kinds.decide()


def stored(out: Path) -> pa.Table:
    node = out / "node-00"
    files = json.loads((node / "manifest.json").read_text())["files"]
    return pa.concat_tables(pq.read_table(node / f["path"]) for f in files)


REFUSED = [
    # an integer past 2^53 next to fractions: float64 would round it (...993 read as ...992)
    (
        ["9007199254740993", "9007199254740995", "0.5"],
        r"x.csv, row 1, column v: 9007199254740993 is an integer float64 cannot hold exactly "
        r"\(it would read as 9007199254740992.0\), and the column is float64 for its fractions "
        r"\('0.5' at row 3\); read the column as exact numbers with --schema "
        r"v=decimal128\(38, 1\), or as text with --schema v=string",
    ),
    (["1", "0.25", "9223372036854775807"], r"row 3, column v: 9223372036854775807 is an integer"),
    # an integer written with a zero fraction is the integer: kept to every digit or refused
    (
        ["0.5", "9007199254740993.0"],
        r"row 2, column v: 9007199254740993.0 is an integer float64 cannot hold exactly \(it would "
        r"read as 9007199254740992.0\), and the column is float64 for its fractions",
    ),
    (
        ["9007199254740993.000", "1.0"],
        r"row 1, column v: 9007199254740993.000 is an integer .*\); ",
    ),
    # past float64's range, or nonzero and read as zero
    (["1", "1e400", "2"], r"row 2, column v: '1e400' is past the largest float64 \(it would read "),
    (["-1E+400", "2.5"], r"row 1, column v: '-1E\+400' is past the largest float64"),
    (["1", "1e-400", "2.5"], r"row 2, column v: '1e-400' is nonzero but closer to 0 than float64"),
    # an integer past int64 is no int64 (nor a rounded float64): a decimal holds it
    (
        ["1", "2", "9223372036854775808"],
        r"row 3, column v: '9223372036854775808' is not int64 like the column's other 2 values; "
        r"read the column as exact numbers with --schema v=decimal128\(38, 0\)",
    ),
    (["1.5", "2.5", "12345678901234567890"], r"'12345678901234567890' is not double.*decimal128"),
    # a column of fractional seconds is timestamp[ns], which holds the years 1677 to 2262 only
    (
        ["1500-01-01 00:00:00", "2025-01-01 00:00:00.5", "2025-01-01 00:00:01"],
        r"row 1, column v: '1500-01-01 00:00:00' is outside the years timestamp\[ns\] holds "
        r"\(1677 to 2262\), the column's type for its fractions of a second \('2025-01-01 "
        r"00:00:00.5' at row 2\); read the column with --schema v=timestamp\[ms\]",
    ),
    (
        ["2025-01-01", "2262-04-12", "2025-01-01 00:00:00.123456"],
        r"row 2, column v: '2262-04-12' is outside .*--schema v=timestamp\[us\]",
    ),
    (
        ["2025-01-01T00:00:00.5Z", "2300-01-01T00:00:00+01:00"],
        r"'2300-01-01T00:00:00\+01:00' is outside .*--schema v=timestamp\[ms, tz=UTC\]",
    ),
    (
        ["2025-01-01 00:00:00.123456789", "2025-01-01 00:00:00.5", "2300-01-01 00:00:00.5"],
        r"'2300-01-01 00:00:00.5' is not timestamp\[ns\] like .*fix the value, or read the "
        r"column as text",  # nanoseconds and the year 2300: no unit holds both
    ),
]


@pytest.mark.parametrize(("values", "match"), REFUSED)
def test_an_inferred_type_that_would_change_a_value_is_refused(
    values: list[str], match: str
) -> None:
    with pytest.raises(CsvError, match=match):
        decide(values)


KEPT = [
    # integers float64 holds exactly (2^60, -2^63), in a column of fractions
    (["1152921504606846976", "0.5", "-9223372036854775808"], pa.float64()),
    (["1", "-0.0", "1e-310", "inf", "-Infinity", "NaN", "0e999", "1e308"], pa.float64()),
    (["9223372036854775807", "-9223372036854775808", "0"], pa.int64()),
    # a zero fraction float64 holds; an exponent is an approximate number (SQL's DOUBLE literal)
    (["0.5", "9007199254740992.000", "9.007199254740993e15"], pa.float64()),
    (["12345678901234567890123456789", "1"], pa.string()),  # mostly text: text, every digit
    (["1677-09-22", "2262-04-10 00:00:00.5"], pa.timestamp("ns")),
    (["0001-01-01", "9999-12-31 23:59:59"], pa.timestamp("s")),  # no fractions: any year
]


@pytest.mark.parametrize(("values", "dtype"), KEPT)
def test_values_at_the_edges_of_their_type_are_kept(values: list[str], dtype: pa.DataType) -> None:
    assert decide(values) == dtype
    got = convert(pa.array(values), dtype, "v", "x.csv", 0).to_pylist()
    if pa.types.is_floating(dtype):
        for text, value in zip(values, got, strict=True):
            assert math.isnan(value) if text == "NaN" else value == float(text), text
            assert math.copysign(1, value) == math.copysign(1, float(text))  # -0.0 stays -0.0


@pytest.mark.parametrize(
    ("dtype", "values", "match"),
    [
        (
            pa.float64(),
            ["1.5", "9007199254740993"],
            r"row 2, column v: 9007199254740993 is an integer float64 cannot hold exactly \(it "
            r"would read as 9007199254740992.0; declared with --schema v=double\); read the "
            r"column as exact numbers with --schema v=decimal128\(38, 1\)",
        ),
        (pa.float32(), ["16777217"], r"16777217 is an integer float32 cannot hold exactly"),
        (pa.float32(), ["1e39"], r"'1e39' is past the largest float32 \(it would read as inf"),
        (pa.decimal128(10, 2), ["1.005"], r"'1.005' is not decimal128\(10, 2\)"),
        (pa.timestamp("ms"), ["2025-01-01 00:00:00.0001"], r"is not timestamp\[ms\]"),
    ],
)
def test_a_declared_type_that_would_change_a_value_is_refused(
    dtype: pa.DataType, values: list[str], match: str
) -> None:
    with pytest.raises(CsvError, match=match):
        convert(pa.array(values), dtype, "v", "x.csv", 0, f"declared with --schema v={dtype}")


def test_the_fix_an_error_names_reads_every_value_exactly(tmp_path: Path) -> None:
    (tmp_path / "ids.csv").write_text("ts,v\n1,9007199254740993\n2,9007199254740995\n3,0.5\n")
    with pytest.raises(CsvError, match=r"--schema v=decimal128\(38, 1\)") as refused:
        shard(str(tmp_path / "ids.csv"), 1, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()  # refused before anything is written
    assert refused.value.exit_code == 2
    shard(
        str(tmp_path / "ids.csv"),
        1,
        str(tmp_path / "out"),
        column_types={"v": pa.decimal128(38, 1)},
    )
    assert stored(tmp_path / "out").column("v").to_pylist() == [
        Decimal("9007199254740993.0"),
        Decimal("9007199254740995.0"),
        Decimal("0.5"),
    ]
