"""Flight client for one storage node: byte accounting, deadlines, and recovery from a node that
restarted.

Every call has a deadline: the per-call timeout, cut to what is left of the query's deadline
(``deadline``, monotonic seconds). Failures become :class:`~dfs_cer.errors.StorageError`
subclasses that name the node and the call (the round): :class:`NodeTimeoutError` (no answer
in time: a hung node), :class:`NodeUnavailableError` (cannot connect), :class:`NodeRefusedError`
(the node answered with an error). Two failures are recovered once per call:

- the connection fails (a node restarting): reconnect and call again;
- the node no longer knows the query (restarted, state lost): the client replays what built
  the query's state there — its ``open`` and push-pull's uploads, which it journals — and calls
  again. Every action is safe to repeat: reads, filters that only prune, a re-sent upload.

A timeout is never retried: the deadline is the user's bound on waiting.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from dfs_cer import interrupt
from dfs_cer.errors import StorageError, UnknownQueryError
from dfs_cer.transport.actions import ACTIONS
from dfs_cer.transport.codes import error_code
from dfs_cer.transport.envelope import is_sealed, open_sealed, primer_digest
from dfs_cer.transport.messages import decode, encode
from dfs_cer.transport.replies import Reply
from dfs_cer.transport.timing import NODE_US, node_seconds, timed_stream

T = TypeVar("T")
R = TypeVar("R", bound=Reply)


class NodeTimeoutError(StorageError):
    """A storage node did not answer within the call's deadline."""


class NodeUnavailableError(StorageError):
    """A storage node cannot be reached."""


class NodeRefusedError(StorageError):
    """A storage node answered a call with an error; ``code`` is the node's error's
    (:mod:`dfs_cer.transport.codes`), else ``refused``."""

    code = "refused"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message, code=code)


@dataclass
class Transfer:
    action: str
    bytes_to_sn: int
    bytes_to_cn: int
    seconds: float
    #: the node's own time on the call, as its reply says (None: not said)
    node_seconds: float | None = None


#: the largest compressed reply a pull accepts (bytes of the stream, before decompression)
MAX_REPLY = 16 * 1024**3


@dataclass
class StorageClient:
    endpoint: str
    token: str
    transfers: list[Transfer] = field(default_factory=list)
    #: seconds one call may take (cut to the query's deadline)
    timeout: float = 30.0
    tls_root_certs: bytes | None = None
    #: the query's deadline (``time.monotonic()`` seconds); None: only the per-call timeout
    deadline: float | None = None
    #: how pulled rows travel (:mod:`dfs_cer.transport.envelope`): "zstd", "lz4", "none"
    #: (an uncompressed stream), or None (plain record batches, counted by their Arrow size)
    compression: str | None = "zstd"
    #: the :func:`~dfs_cer.transport.envelope.primer` of the schema the query's rows have
    #: (known after open): small zstd pulls of that schema travel primed with it
    primer: bytes | None = None

    def __post_init__(self) -> None:
        self._journal: list[tuple[str, Callable[[], None]]] = []
        self._replayed = False
        self._connect()

    @property
    def reopened(self) -> bool:
        """Was the current query re-opened on this node (it restarted) since ``open``?"""
        return self._replayed

    def _connect(self) -> None:
        location = self.endpoint if "://" in self.endpoint else f"grpc+tcp://{self.endpoint}"
        kwargs = {"tls_root_certs": self.tls_root_certs} if self.tls_root_certs else {}
        self._client = flight.FlightClient(location, **kwargs)

    def __getstate__(self) -> dict[str, Any]:  # picklable for Spark: reconnect lazily
        return {
            "endpoint": self.endpoint,
            "token": self.token,
            "transfers": [],
            "timeout": self.timeout,
            "tls_root_certs": self.tls_root_certs,
            "deadline": None,
            "compression": self.compression,
            "primer": self.primer,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    # ------------------------------------------------------------------ deadlines and recovery

    def _options(self, what: str) -> flight.FlightCallOptions:
        timeout = self.timeout
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise NodeTimeoutError(
                    f"the query's deadline passed before {what} on storage node {self.endpoint}"
                )
            timeout = min(timeout, left)
        return flight.FlightCallOptions(
            headers=[(b"authorization", f"Bearer {self.token}".encode())], timeout=timeout
        )

    def _call(
        self, what: str, fn: Callable[[flight.FlightCallOptions], T], replay: bool = True
    ) -> T:
        reconnected = False
        while True:
            options = self._options(what)
            try:
                return interrupt.call(functools.partial(fn, options))
            except flight.FlightTimedOutError:
                raise NodeTimeoutError(
                    f"storage node {self.endpoint} did not answer {what} within "
                    f"{options.timeout:.1f} s"
                ) from None
            except flight.FlightUnavailableError as exc:
                if reconnected:
                    raise NodeUnavailableError(
                        f"storage node {self.endpoint} is unreachable during {what}: {_short(exc)}"
                    ) from None
                reconnected = True
                self._reconnect()
            except flight.FlightError as exc:
                code = error_code(exc)
                if (
                    code == UnknownQueryError.code
                    and replay
                    and self._journal
                    and not self._replayed
                ):
                    self._replayed = (
                        True  # the node restarted: rebuild the query's state there, once a query
                    )
                    self._replay(what)
                    continue
                if code == UnknownQueryError.code and replay and self._replayed:
                    raise NodeRefusedError(
                        f"storage node {self.endpoint} lost the query again during {what} (it "
                        "was re-opened there once already, after a restart); run the query "
                        "again",
                        code,
                    ) from None
                raise NodeRefusedError(
                    f"storage node {self.endpoint} refused {what}: {_short(exc)}", code
                ) from None

    def _reconnect(self) -> None:
        with contextlib.suppress(Exception):  # the old connection is gone either way
            self._client.close()
        time.sleep(0.2)
        self._connect()

    def _replay(self, what: str) -> None:
        for name, step in self._journal:
            try:
                step()
            except StorageError as exc:
                raise NodeRefusedError(
                    f"storage node {self.endpoint} lost the query before {what} and could not "
                    f"re-open it ({name}): {exc}",
                    exc.code,
                ) from None

    # ------------------------------------------------------------------ calls

    def action(
        self, name: str, header: dict[str, Any] | None = None, blobs: list[bytes] | None = None
    ) -> tuple[dict[str, Any], list[bytes]]:
        body = encode(header or {}, blobs)
        start = time.perf_counter()

        def call(options: flight.FlightCallOptions) -> list[Any]:
            return list(self._client.do_action(flight.Action(name, body), options=options))

        entry = ACTIONS.get(name)
        results = self._call(name, call, replay=entry is None or entry.reopens)
        raw = results[0].body.to_pybytes() if results else b""
        elapsed = time.perf_counter() - start
        reply = decode(raw)
        self.transfers.append(
            Transfer(name, len(body), len(raw), elapsed, node_seconds(reply[0].get(NODE_US)))
        )
        if name == "open" and not reply[0].get("refused"):
            # what rebuilds the query's state if the node restarts: the same open, waiting for
            # room there (no arrival), on the snapshot the node served
            again = {k: v for k, v in (header or {}).items() if k != "arrival"}
            if reply[0].get("snapshot") is not None:
                again["snapshot"] = reply[0]["snapshot"]
            replay = encode(again, blobs)
            self._journal = [
                ("open", lambda: self._quiet_action(name, replay, _fingerprint(reply[0])))
            ]
            self._replayed = False
        return reply

    def call(
        self, reply: type[R], header: dict[str, Any] | None = None, blobs: list[bytes] | None = None
    ) -> tuple[R, list[bytes]]:
        """:meth:`action` ``reply.ACTION``, its reply header parsed into ``reply`` (checked once,
        here: a missing or ill-typed field is a ProtocolError)."""
        head, out = self.action(reply.ACTION, header, blobs)
        return reply.parse(head), out

    def _quiet_action(self, name: str, body: bytes, expected: tuple[Any, ...]) -> None:
        """Repeat a journaled open (its bytes count as the round trip they belong to); the node
        must serve the data it served before (same rows and schema), else the query fails."""
        results = self._call(
            name,
            lambda o: list(self._client.do_action(flight.Action(name, body), options=o)),
            replay=False,
        )
        raw = results[0].body.to_pybytes() if results else b""
        self.transfers.append(Transfer(name, len(body), len(raw), 0.0))
        got = _fingerprint(decode(raw)[0])
        if got != expected:
            raise NodeRefusedError(
                f"storage node {self.endpoint} restarted serving other data (rows, schema and "
                f"content digests {got}, before {expected}); run the query again"
            )

    def pull(self, header: dict[str, Any], blobs: list[bytes] | None = None) -> pa.Table:
        if (
            header.get("kind") == "pull_all" and self._journal
        ):  # the node must still hold the opened query
            header = {**header, "opened": True}
        if self.compression is not None:
            header = {**header, "compression": self.compression}
        if self.compression == "zstd" and self.primer is not None:
            header["primed"] = primer_digest(self.primer)
        ticket = encode(header, blobs)
        what = str(header.get("kind"))
        start = time.perf_counter()
        table = self._call(what, lambda o: self._read(flight.Ticket(ticket), o))
        table, node = timed_stream(table)
        size = table.nbytes
        if is_sealed(table):  # the bytes that crossed the network: the compressed stream's
            table, size = open_sealed(table, MAX_REPLY, self.primer)
        self.transfers.append(Transfer(what, len(ticket), size, time.perf_counter() - start, node))
        return table

    def _read(self, ticket: flight.Ticket, options: flight.FlightCallOptions) -> pa.Table:
        """A pull's stream, read whole; Ctrl-C cancels it (:mod:`dfs_cer.interrupt`)."""
        reader = self._client.do_get(ticket, options=options)
        with interrupt.on_trip(reader.cancel):
            try:
                return reader.read_all()
            except Exception:  # a cancelled stream's error, whichever Flight gives
                if interrupt.interrupted():
                    raise KeyboardInterrupt from None
                raise

    def upload(self, header: dict[str, Any], table: pa.Table) -> None:
        """DoPut ``table`` (push-pull: a processed variable's events)."""
        command = encode(header)
        start = time.perf_counter()

        def put(options: flight.FlightCallOptions) -> None:
            writer, _ = self._client.do_put(
                flight.FlightDescriptor.for_command(command), table.schema, options=options
            )
            writer.write_table(table)
            writer.close()

        self._call("upload", put)
        self._journal.append(("upload", lambda: self._call("upload", put, replay=False)))
        self.transfers.append(
            Transfer("upload", len(command) + table.nbytes, 0, time.perf_counter() - start)
        )

    def close(self) -> None:
        self._client.close()


def _fingerprint(reply: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies the data an open saw: the shard set's rows, schema and content digest (the
    manifest and every file's footer), for each query of a group."""
    group = reply.get("group") or [reply]
    return tuple(
        (g.get("total_rows"), g.get("schema_digest"), g.get("data_digest"))
        for g in group
        if isinstance(g, dict)
    )


def _short(exc: Exception) -> str:
    text = str(exc)
    return text.split(". Detail:")[0].replace(
        "Flight returned unavailable error, with message: ", ""
    )
