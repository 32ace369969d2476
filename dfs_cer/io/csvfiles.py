"""CSV input (a file or a directory of files, local or S3) with its column types decided from
every value (:mod:`dfs_cer.io.csvtypes`): one pass reads every value as text and decides the
types, a second streams the converted rows. Nothing holds the whole input in memory."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.fs as pafs

from dfs_cer.io.csvtypes import ColumnKinds, CsvError, check_declared, convert
from dfs_cer.io.files import FileLocation

BLOCK = 16 << 20


def as_text(names: list[str], null_values: Sequence[str] = ()) -> pacsv.ConvertOptions:
    """Read ``names`` (only those) as text: an unquoted empty field (or one of ``null_values``,
    such as R's ``NA``) is NULL, a quoted one ''."""
    return pacsv.ConvertOptions(
        column_types=dict.fromkeys(names, pa.string()),
        include_columns=names,
        null_values=["", *null_values],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )


class CsvInput:
    """CSV files as ``dfs-cer shard`` (and ``--table``, Iceberg appends) read them: ``schema``,
    ``count_rows``, ``null_count``, ``to_batches`` (of ``batch_size`` rows), ``reader``."""

    def __init__(
        self,
        location: FileLocation,
        declared: Mapping[str, pa.DataType] | None = None,
        null_values: Sequence[str] = (),
    ) -> None:
        self.location = location
        self.declared = dict(declared or {})
        self.null_values = tuple(null_values)
        info = location.fs.get_file_info(location.path)
        if info.type == pafs.FileType.NotFound:
            raise CsvError(
                f"cannot read input {location.uri}: no such file or directory; check --input"
            )
        if info.type == pafs.FileType.Directory:
            found = location.fs.get_file_info(pafs.FileSelector(location.path, recursive=True))
            self.files = sorted(
                f.path
                for f in found
                if f.type == pafs.FileType.File and not f.base_name.startswith((".", "_"))
            )
        else:
            self.files = [location.path]
        self.names = self._header(self.files[0]) if self.files else []
        check_declared(self.declared, self.names, location.uri)
        self.rows = 0
        self._nulls = dict.fromkeys(self.names, 0)
        self._quoted_empty = dict.fromkeys(self.names, 0)  # NULL too unless the column is text
        kinds = {n: ColumnKinds(n) for n in self.names if n not in self.declared}
        for uri, offset, batch in self._text_batches():
            self.rows += batch.num_rows
            for name, column in zip(self.names, batch.columns, strict=True):
                self._nulls[name] += column.null_count
                self._quoted_empty[name] += pc.sum(pc.equal(column, "")).as_py() or 0
                if name in kinds:
                    kinds[name].observe(column, uri, offset)
                else:  # a declared type: every value must fit it
                    convert(column, self.declared[name], name, uri, offset, self._why(name))
        self.schema = pa.schema(
            [(n, self.declared[n] if n in self.declared else kinds[n].decide()) for n in self.names]
        )

    def _uri(self, path: str) -> str:
        return (
            self.location.uri
            if path == self.location.path
            else self.location.uri.rstrip("/") + path[len(self.location.path.rstrip("/")) :]
        )

    def _header(self, path: str) -> list[str]:
        with self.location.fs.open_input_stream(path) as fh:
            try:
                names = list(
                    pacsv.open_csv(
                        fh, read_options=pacsv.ReadOptions(block_size=1 << 20)
                    ).schema.names
                )
            except pa.ArrowInvalid as exc:
                raise CsvError(f"cannot read input {self._uri(path)}: {exc}") from None
        if "" in names:  # no query could name it
            raise CsvError(
                f"{self._uri(path)}: column {names.index('') + 1} of its header has no name; name "
                "it"
            )
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise CsvError(
                f"{self._uri(path)} names column(s) {', '.join(twice)} twice in its header; rename "
                "them"
            )
        return names

    def _text_batches(self) -> Iterator[tuple[str, int, pa.RecordBatch]]:
        """Every row as text (an unquoted empty field NULL), with its file and the rows before
        it."""
        text = as_text(self.names, self.null_values)
        for path in self.files:
            uri = self._uri(path)
            if path != self.files[0] and self._header(path) != self.names:
                raise CsvError(
                    f"{uri} has columns {', '.join(self._header(path))}, not those of "
                    f"{self._uri(self.files[0])} ({', '.join(self.names)}); give files of one "
                    "header"
                )
            offset = 0
            with self.location.fs.open_input_stream(path) as fh:
                try:
                    for batch in pacsv.open_csv(
                        fh, read_options=pacsv.ReadOptions(block_size=BLOCK), convert_options=text
                    ):
                        yield uri, offset, batch
                        offset += batch.num_rows
                except pa.ArrowInvalid as exc:
                    raise CsvError(f"cannot read input {uri}: {exc}") from None

    def count_rows(self) -> int:
        return self.rows

    def null_count(self, column: str) -> int:
        """NULLs (empty fields) in ``column``."""
        text = pa.types.is_string(self.schema.field(column).type)
        return self._nulls[column] + (0 if text else self._quoted_empty[column])

    def _converted(self) -> Iterator[pa.RecordBatch]:
        for uri, offset, batch in self._text_batches():
            yield pa.record_batch(
                [
                    convert(c, f.type, f.name, uri, offset, self._why(f.name), exact=False)
                    for c, f in zip(batch.columns, self.schema, strict=True)
                ],
                schema=self.schema,
            )

    def _why(self, name: str) -> str | None:
        return (
            f"declared with --schema {name}={self.declared[name]}"
            if name in self.declared
            else None
        )

    def to_batches(self, batch_size: int = 1_000_000) -> Iterator[pa.RecordBatch]:
        """The rows in batches of ``batch_size`` (the last one shorter), whatever the read
        blocks."""
        pending: list[pa.RecordBatch] = []
        rows = 0
        for batch in self._converted():
            pending.append(batch)
            rows += batch.num_rows
            while rows >= batch_size:
                table = pa.Table.from_batches(pending, self.schema)
                yield from table.slice(0, batch_size).combine_chunks().to_batches()
                pending, rows = (
                    table.slice(batch_size).combine_chunks().to_batches(),
                    rows - batch_size,
                )
        if rows:
            yield from pa.Table.from_batches(pending, self.schema).combine_chunks().to_batches()

    def reader(self, batch_size: int = 1_000_000) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches(batch_size))

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self._converted()), self.schema)
