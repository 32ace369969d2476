"""Compressed event transfers: an Arrow IPC stream with buffer compression, carried in chunks.

A pull that names a ``compression`` (``zstd``, ``lz4`` or ``none``) gets its rows as one Arrow IPC
stream written with that buffer compression (with zstd and lz4, string columns of few distinct
values dictionary-encoded too), cut into chunks of :data:`CHUNK` bytes and sent as the rows of a
one-column binary table (:data:`COLUMN`). The receiver counts exactly the bytes that crossed the
network (the chunks), then reads the stream back, decoding dictionaries to the columns' own types:
the rows are the same as an uncompressed transfer's, in the same order.

A small reply (up to :data:`WHOLE_MAX` bytes of stream) with ``zstd`` also tries the other way:
the stream written without buffer compression, compressed whole as one zstd frame (its schema,
its few buffers and their framing compress together), sent in :data:`COLUMN_WHOLE` with the
stream's length first; the smaller of the two travels. A handful of rows then costs a few
hundred bytes, not the kilobyte of per-buffer frames and schema. When the compute node already
knows the schema (it names its :func:`primer`'s digest in the pull), the frame is primed with
that schema's own stream (:data:`COLUMN_PRIMED`): the schema and the batch's framing then cost
next to nothing, and one row travels in about 30 bytes instead of 380.

A pull without ``compression`` gets plain Arrow record batches (any Flight client can read
them); their in-memory size is what is counted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import zstandard

from dfs_cer.errors import ProtocolError
from dfs_cer.options import COMPRESSIONS

#: the one column of an enveloped reply
COLUMN = "__dfs_cer_ipc"
#: the one column of a reply whose whole stream is one zstd frame (8 bytes of length first)
COLUMN_WHOLE = "__dfs_cer_ipc_zstd"
#: the one column of a reply compressed whole with the schema's :func:`primer` as dictionary
COLUMN_PRIMED = "__dfs_cer_ipc_zstd_primed"
#: streams up to this size (uncompressed) with zstd are also tried compressed whole
WHOLE_MAX = 1024 * 1024
#: primed streams up to this size are compressed at zstd's highest level (a few ms at most)
PRIMED_STRONG_MAX = 64 * 1024
_WHOLE = pa.Codec("zstd", compression_level=3)
#: bytes per chunk of the stream
CHUNK = 4 * 1024 * 1024
#: chunks per record batch of an enveloped reply
BATCH_CHUNKS = 16
#: schema metadata naming the columns sent dictionary-encoded (decoded on arrival)
DICTIONARY_KEY = b"dfs_cer_dictionary"
#: a string column is sent dictionary-encoded when it has at most this share of distinct values
DICTIONARY_SHARE = 0.5
_SAMPLE = 65_536


def _codec(compression: str) -> str | None:
    if compression not in COMPRESSIONS:
        raise ProtocolError(
            f"compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}"
        )
    return None if compression == "none" else compression


def _encodable(column: pa.ChunkedArray) -> bool:
    """A string column repeating its values enough that a dictionary makes it smaller."""
    if (
        not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type))
        or len(column) < 64
    ):
        return False
    sample = column.slice(0, _SAMPLE)
    return pc.count_distinct(sample).as_py() <= DICTIONARY_SHARE * len(sample)


def primer(schema: pa.Schema) -> bytes:
    """What primes a whole-compressed reply of ``schema``: the IPC stream of one row of zeros
    (the schema's message and a batch's framing), the same bytes on both sides."""
    try:
        one = pa.table({f.name: _zero(f.type) for f in schema}, schema=schema)
    except (pa.ArrowException, ValueError, TypeError):
        one = schema.empty_table()
    return _stream(one, pa.ipc.IpcWriteOptions()).to_pybytes()


def _zero(kind: pa.DataType) -> pa.Array:
    """One value of ``kind`` with no validity buffer, as most columns of a pull have none."""
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pa.array([""], kind)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pa.array([b""], kind)
    if pa.types.is_boolean(kind):
        return pa.array([False], kind)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return pa.array([0], kind)
    if pa.types.is_temporal(kind):
        return pa.array([0], pa.int64()).cast(kind)
    return pa.nulls(1, kind)


def primer_digest(primed: bytes) -> str:
    """What a pull names its primer by (both sides compute it from the schema they hold)."""
    return hashlib.sha256(primed).hexdigest()[:8]


def _primed(primed: bytes) -> zstandard.ZstdCompressionDict:
    return zstandard.ZstdCompressionDict(primed, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


def seal(
    table: pa.Table,
    compression: str,
    primed: str | None = None,
    charge: Callable[[int], None] | None = None,
) -> pa.Table:
    """``table`` as an enveloped reply: its IPC stream (with ``compression``) in binary chunks.
    ``primed``: the digest of the compute node's :func:`primer` (used when it is this table's).
    ``charge(nbytes)`` is told what the reply takes as it is made: the dictionary indices
    before they are encoded, each dictionary and each batch of the stream once written (a
    storage node charges them to the query; it raises to stop)."""
    options = pa.ipc.IpcWriteOptions(compression=_codec(compression))
    # none is the paper's comparison: the rows as they are, uncompressed and not dictionary-encoded
    encoded = (
        []
        if compression == "none"
        else [
            name
            for name, column in zip(table.column_names, table.columns, strict=True)
            if _encodable(column)
        ]
    )
    if encoded:
        if charge is not None:
            charge(4 * table.num_rows * len(encoded))  # the int32 indices
        for name in encoded:
            i = table.schema.get_field_index(name)
            table = table.set_column(
                i,
                table.schema.field(i).with_type(
                    pa.dictionary(pa.int32(), table.schema.field(i).type)
                ),
                pc.dictionary_encode(table.column(i)).combine_chunks(),
            )
            if charge is not None:
                charge(table.column(i).chunk(0).dictionary.nbytes)
        metadata = dict(table.schema.metadata or {})
        metadata[DICTIONARY_KEY] = ",".join(encoded).encode()
        table = table.replace_schema_metadata(metadata)
    stream = _stream(table, options, charge)
    column = COLUMN
    if compression == "zstd" and stream.size <= WHOLE_MAX:
        plain = _stream(table, pa.ipc.IpcWriteOptions())
        if plain.size <= WHOLE_MAX:  # the receiver inflates at most that much
            whole = pa.py_buffer(
                plain.size.to_bytes(8, "little") + _WHOLE.compress(plain, asbytes=True)
            )
            if whole.size < stream.size:
                stream, column = whole, COLUMN_WHOLE
            mine = primer(table.schema) if primed is not None else b""
            if mine and primer_digest(mine) == primed:
                level = 19 if plain.size <= PRIMED_STRONG_MAX else 3
                z = zstandard.ZstdCompressor(
                    level=level,
                    dict_data=_primed(mine),
                    write_content_size=False,
                    write_dict_id=False,
                    write_checksum=True,  # a primer that differs fails, never misreads
                ).compress(plain.to_pybytes())
                if 8 + len(z) < stream.size:
                    stream = pa.py_buffer(plain.size.to_bytes(8, "little") + z)
                    column = COLUMN_PRIMED
    return _chunked(stream, column)


def _chunked(stream: pa.Buffer, column: str) -> pa.Table:
    """``stream`` as the rows of a one-column table: chunks of :data:`CHUNK` bytes (slices of the
    stream, not copies), :data:`BATCH_CHUNKS` to a record batch (no message on the wire holds
    the whole stream)."""
    size = stream.size
    batches = []
    for start in range(0, size, CHUNK * BATCH_CHUNKS):
        end = min(size, start + CHUNK * BATCH_CHUNKS)
        offsets = np.append(np.arange(0, end - start, CHUNK, dtype=np.int64), end - start)
        chunks = pa.Array.from_buffers(
            pa.large_binary(),
            offsets.size - 1,
            [None, pa.py_buffer(offsets), stream.slice(start, end - start)],
        )
        batches.append(pa.record_batch([chunks], names=[column]))
    schema = pa.schema([(column, pa.large_binary())])
    return pa.Table.from_batches(batches, schema=schema)


def _stream(
    table: pa.Table, options: pa.ipc.IpcWriteOptions, charge: Callable[[int], None] | None = None
) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        for batch in table.to_batches():
            before = sink.tell()
            writer.write_batch(batch)
            if charge is not None:
                charge(sink.tell() - before)
    return sink.getvalue()


def is_sealed(table: pa.Table) -> bool:
    return table.column_names in ([COLUMN], [COLUMN_WHOLE], [COLUMN_PRIMED])


def open_sealed(table: pa.Table, limit: int, primed: bytes | None = None) -> tuple[pa.Table, int]:
    """The rows of an enveloped reply and the bytes its chunks held; ``limit`` bounds the
    stream's size (a reply larger than that is refused before it is read); ``primed``: the
    :func:`primer` the pull named."""
    whole = table.column_names in ([COLUMN_WHOLE], [COLUMN_PRIMED])
    is_primed = table.column_names == [COLUMN_PRIMED]
    if is_primed and primed is None:
        raise ProtocolError("a reply compressed with a primer the pull did not name")
    blobs = [b for b in table.column(0).to_pylist() if b is not None]
    size = sum(len(b) for b in blobs)
    if size > limit:
        raise ProtocolError(f"a reply of {size} bytes exceeds the limit of {limit} bytes")
    stream = b"".join(blobs)
    if whole:
        length = int.from_bytes(stream[:8], "little") if len(stream) >= 8 else -1
        if not 0 <= length <= WHOLE_MAX:
            raise ProtocolError(
                f"a compressed reply declares a stream of {length} bytes (at most {WHOLE_MAX})"
            )
        try:
            if is_primed:
                assert primed is not None
                stream = zstandard.ZstdDecompressor(dict_data=_primed(primed)).decompress(
                    stream[8:], max_output_size=length
                )
                if len(stream) != length:
                    raise ValueError(f"{len(stream)} bytes where {length} are declared")
            else:
                stream = _WHOLE.decompress(stream[8:], length, asbytes=True)
        except (pa.ArrowInvalid, OSError, zstandard.ZstdError, ValueError) as exc:
            raise ProtocolError(f"a compressed reply does not decode ({exc})") from None
    try:
        rows = pa.ipc.open_stream(pa.py_buffer(stream)).read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise ProtocolError(f"a compressed reply does not decode ({exc})") from None
    names = (rows.schema.metadata or {}).get(DICTIONARY_KEY)
    if names:
        for name in names.decode().split(","):
            i = rows.schema.get_field_index(name)
            if i < 0 or not pa.types.is_dictionary(rows.schema.field(i).type):
                raise ProtocolError(
                    f"a compressed reply names {name!r} as dictionary-encoded, but it is not"
                )
            value_type = rows.schema.field(i).type.value_type
            rows = rows.set_column(
                i, rows.schema.field(i).with_type(value_type), rows.column(i).cast(value_type)
            )
        metadata = {k: v for k, v in (rows.schema.metadata or {}).items() if k != DICTIONARY_KEY}
        rows = rows.replace_schema_metadata(metadata or None)
    return rows, size
