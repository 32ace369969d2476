"""The storage node process: an Arrow Flight server over one shard set.

``dfs-cer storage-node serve --data <dir|s3://...> --port P --token-file F [--memory-budget 2GiB]``

Every call must carry the shared token (``authorization: Bearer <token>``). Actions exchange
framed messages (:mod:`dfs_cer.transport.messages`); pulls stream Arrow record batches through
DoGet. Bad requests get Flight errors with a clear message and the server keeps serving.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.flight as flight

from dfs_cer.config import StorageConfig, TablesConfig, load_config, parse_size
from dfs_cer.errors import ConfigError, DfsCerError, ProtocolError
from dfs_cer.logs import DEFAULT_LEVEL, LEVELS, configure, set_query_id
from dfs_cer.options import COMPRESSIONS
from dfs_cer.transport.actions import ACTIONS, STATELESS_PULLS
from dfs_cer.transport.codes import code_info
from dfs_cer.transport.envelope import seal
from dfs_cer.transport.messages import decode, encode
from dfs_cer.transport.protocol import query_id
from dfs_cer.transport.timing import stamp_header, stamp_stream
from storage_node.lean import hide, loaded_heavy, resident_bytes, tune_memory
from storage_node.logs import logged_call
from storage_node.state import StateRegistry
from storage_node.traffic import Traffic

if TYPE_CHECKING:  # the store and the query handlers load when the node needs them
    from dfs_cer.work import Work
    from storage_node.actions.routes import Routes
    from storage_node.store import ShardStore

log = logging.getLogger(__name__)


class TokenMiddlewareFactory(flight.ServerMiddlewareFactory):
    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def start_call(self, info: Any, headers: dict[str, list[str]]) -> None:
        values = headers.get("authorization") or headers.get("Authorization") or []
        given = values[0] if values else ""
        if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            log.warning("refused a call: missing or wrong storage node token")
            raise flight.FlightUnauthenticatedError("missing or wrong storage node token")
        return None


class StorageNode(flight.FlightServerBase):
    def __init__(
        self,
        location: str,
        store: ShardStore,
        token: str,
        config: StorageConfig,
        tls: list[flight.CertKeyPair] | None = None,
    ) -> None:
        super().__init__(
            location, middleware={"auth": TokenMiddlewareFactory(token)}, tls_certificates=tls or []
        )
        self.store = store
        self.config = config
        self.registry = StateRegistry(
            config.memory_budget,
            config.state_ttl_seconds,
            config.admission_wait_seconds,
            config.query_work_bytes,
        )
        self._routes: Routes | None = None
        self._routes_lock = threading.Lock()
        self.started = time.time()
        self.calls = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self._lock = threading.Lock()
        self.traffic = Traffic()  # per action and error code, for --metrics-port

    @property
    def routes(self) -> Routes:
        """Every protocol entry bound to its handler (``server``: this object's health and
        stats), built on the first call that needs one: the handlers, the SQL parser and the
        compiled filter kernels load then (or at start with ``storage.warm_up``), so a node at
        rest holds none of them and every strategy's first query loads the same."""
        with self._routes_lock:
            if self._routes is None:
                from storage_node.actions.base import Node, node_betas
                from storage_node.actions.routes import Routes
                from storage_node.warmup import warm_up

                node = Node(
                    self.store,
                    self.registry,
                    self.config.max_message_bytes,
                    node_betas(self.config.calibration_file),
                    self.config.match_cpu_budget_seconds,
                    self.config.work_threads,
                    self.config.filter_cost_limit,
                    self.config.halo_limit,
                )
                routes = Routes(node, self)
                warm_up()
                self._routes = routes
            return self._routes

    def _count(self, action: str, bytes_in: int, bytes_out: int) -> None:
        with self._lock:
            self.calls += 1
            self.bytes_in += bytes_in
            self.bytes_out += bytes_out
        self.traffic.count(action, bytes_in, bytes_out)

    def _guard(
        self, body: bytes, opens: bool = False, blobs: bool = True
    ) -> tuple[dict[str, Any], list[bytes]]:
        """Decode a request: bounded in size before and after decompression, and (unless it
        opens a query) naming a query this node holds before any blob is inflated; requests
        that take no blobs (``blobs=False``) may not carry any."""
        if len(body) > self.config.max_message_bytes:
            raise ProtocolError(
                f"message of {len(body)} bytes exceeds the storage node's limit of "
                f"{self.config.max_message_bytes} (storage.max_message_bytes)"
            )
        self.registry.sweep()

        def known(header: dict[str, Any]) -> None:
            qid = header.get("query_id")
            if qid is not None:
                query_id(qid, "request")
                set_query_id(qid)  # on every line logged for this call from here on
            stateful = not opens and header.get("kind") not in STATELESS_PULLS
            if stateful and qid is None:
                raise ProtocolError("the request names no query_id")
            if stateful and isinstance(qid, str) and self.registry.find(qid) is None:
                self.registry.get(qid)  # raises UnknownQueryError

        cap = self.config.max_message_bytes
        return decode(body, cap if blobs else 0, known, header_limit=cap)

    def _translate(self, exc: Exception) -> Exception:
        """A node's error as the client sees it: every DfsCerError by its class name, message and
        code (the client decides on the code: re-open, send again, pull instead, try later)."""
        self.traffic.error(
            (exc.code or type(exc).__name__) if isinstance(exc, DfsCerError) else "internal"
        )
        if isinstance(exc, DfsCerError):
            return flight.FlightServerError(
                f"{type(exc).__name__}: {exc}", extra_info=code_info(exc.code)
            )
        return flight.FlightInternalError(f"storage node error: {type(exc).__name__}: {exc}")

    def list_actions(self, context: Any) -> list[tuple[str, str]]:
        return [(a, f"dfs-cer {a}") for a in ACTIONS]

    def health(
        self, header: dict[str, Any], blobs: list[bytes]
    ) -> tuple[dict[str, Any], list[bytes]]:
        return {
            "status": "ok",
            "rows": self.store.manifest.get("rows"),
            "uptime_s": time.time() - self.started,
        }, []

    def stats(
        self, header: dict[str, Any], blobs: list[bytes]
    ) -> tuple[dict[str, Any], list[bytes]]:
        stats = self.registry.stats()
        stats.update(
            {
                "calls": self.calls,
                "bytes_in": self.bytes_in,
                "bytes_out": self.bytes_out,
                "slice_rows": 0 if self._routes is None else self._routes.node.slice_rows,
                **self.store.cache_stats(),
                "resident_bytes": resident_bytes(),
                "heavy_modules": loaded_heavy(),
            }
        )
        return stats, []

    @logged_call("action")
    def do_action(self, context: Any, action: flight.Action) -> Iterator[flight.Result]:
        started = time.perf_counter()
        body = action.body.to_pybytes() if action.body is not None else b""
        try:
            entry = ACTIONS.get(action.type)
            if entry is None:
                raise ProtocolError(
                    f"unknown action {action.type!r}; actions: {', '.join(ACTIONS)}"
                )
            header: dict[str, Any] = {}
            blobs: list[bytes] = []
            if entry.decoded:
                header, blobs = self._guard(body, opens=entry.lifecycle, blobs=entry.blobs)
            routes = self._routes
            if routes is None and entry.family == "server":  # health, stats: load no handlers
                reply = getattr(self, entry.handler)(header, blobs)
            else:
                reply = (routes or self.routes).handlers[entry.name](header, blobs)
            stamp_header(reply[0], time.perf_counter() - started)
            out = encode(*reply)
        except flight.FlightError:
            raise
        except Exception as exc:  # every error becomes a Flight error; the server keeps serving
            raise self._translate(exc) from exc
        self._count(action.type, len(body), len(out))
        return iter([flight.Result(pa.py_buffer(out))])

    @logged_call("upload")
    def do_put(
        self, context: Any, descriptor: flight.FlightDescriptor, reader: Any, writer: Any
    ) -> None:
        try:
            header, _ = self._guard(descriptor.command, blobs=False)
            batches, size = [], 0
            for chunk in reader:  # bounded like every message: stop reading past the limit
                size += chunk.data.nbytes
                if size > self.config.max_message_bytes:
                    raise ProtocolError(
                        f"upload of more than {self.config.max_message_bytes} bytes exceeds the "
                        "storage node's limit (storage.max_message_bytes)"
                    )
                batches.append(chunk.data)
            table = pa.Table.from_batches(batches, schema=reader.schema)
            self.routes.handlers["upload"](header, table)
        except flight.FlightError:
            raise
        except Exception as exc:
            raise self._translate(exc) from exc
        self._count("upload", len(descriptor.command) + table.nbytes, 0)

    @logged_call("pull")
    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.GeneratorStream:
        """A pull's rows as Arrow record batches of bounded size (with a ``compression``: one
        compressed IPC stream in chunks, whose bytes the client counts). What the reply takes
        stays charged to its query until it has been sent."""
        started = time.perf_counter()
        try:
            header, blobs = self._guard(ticket.ticket)
            compression = header.get("compression")
            primed = header.get("primed")
            if compression is not None:
                if not isinstance(compression, str):
                    raise ProtocolError(f"compression must be one of {', '.join(COMPRESSIONS)}")
                if primed is not None and not (isinstance(primed, str) and len(primed) <= 64):
                    raise ProtocolError("primed must name a primer's digest (<= 64 characters)")
            table, held = self.routes.pulls.pull(
                header, blobs, lambda rows, work: _wire(rows, compression, primed, work)
            )
            table = stamp_stream(table, time.perf_counter() - started)
        except flight.FlightError:
            raise
        except Exception as exc:
            raise self._translate(exc) from exc
        self._count("pull", len(ticket.ticket), table.nbytes)
        return _stream(table, held)


def _wire(rows: pa.Table, compression: str | None, primed: str | None, work: Work) -> pa.Table:
    """A pull's reply: the rows in bounded record batches, or sealed in one compressed stream
    (charged as it is written, a bounded batch at a time)."""
    from dfs_cer.work import ROWS
    from storage_node.rows import bounded

    rows = bounded(rows)
    if compression is None:
        return rows
    return seal(rows, compression, primed, lambda n: work.charge(n, ROWS))


def _stream(table: pa.Table, held: Work) -> flight.GeneratorStream:
    """``table``'s record batches, the bytes ``held`` given back once they are sent (or the
    stream dropped unsent)."""

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from table.to_batches()
        finally:
            held.settle()

    out = batches()
    weakref.finalize(out, held.settle)  # a stream dropped before its first batch
    return flight.GeneratorStream(table.schema, out)


def read_token(path: str) -> str:
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the token file {path} ({exc.strerror or exc}): make one with dfs-cer "
            f"storage-node token {path}"
        ) from exc
    if len(token) < 16:
        raise ConfigError(
            f"the token in {path} is too short ({len(token)} characters): use at least 16, e.g. "
            "a new file from dfs-cer storage-node token FILE"
        )
    return token


def open_store(data: str, storage: StorageConfig, tables: TablesConfig) -> ShardStore:
    """What ``--data`` names: a table served in place (``iceberg://...``, ``hive:...``) or a
    shard set written by ``dfs-cer shard``."""
    from dfs_cer.io.tables import is_table, parse_table

    if is_table(data):
        from storage_node.tables import TableStore

        return TableStore(parse_table(data), storage, tables)
    from storage_node.store import ShardStore

    return ShardStore(data, storage)


def serve(
    data: str,
    port: int | None,
    token_file: str,
    memory_budget: str | None = None,
    host: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    ready_file: str | None = None,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> None:
    token = read_token(token_file)  # before loading any rows: a missing token fails at once
    config = load_config()
    cfg = config.storage
    import dataclasses

    if memory_budget is not None:
        cfg = dataclasses.replace(cfg, memory_budget=parse_size(memory_budget, "--memory-budget"))
    store = open_store(data, cfg, config.tables)
    if cfg.preload:
        started = time.perf_counter()
        try:
            indexed = store.preload()
        except (
            DfsCerError,
            OSError,
            pa.ArrowException,
        ) as exc:  # served anyway: each query names the error
            print(
                f"storage node: preloading {store.location.uri} failed ({exc}); rows load on the "
                "first query",
                flush=True,
            )
        else:
            if indexed:
                print(
                    f"storage node: {store.cache_stats()['cached_bytes']:,} bytes cached, value "
                    f"indexes on {', '.join(indexed)} ({time.perf_counter() - started:.1f} s)",
                    flush=True,
                )
    tls = None
    scheme = "grpc+tcp"
    if tls_cert and tls_key:
        tls = [flight.CertKeyPair(Path(tls_cert).read_bytes(), Path(tls_key).read_bytes())]
        scheme = "grpc+tls"
    location = f"{scheme}://{host or cfg.host}:{cfg.port if port is None else port}"
    server = StorageNode(location, store, token, cfg, tls)
    if cfg.warm_up:
        server.routes  # noqa: B018 - loads the query handlers and kernels before ready
    metrics = None
    if metrics_port is not None:
        from storage_node.metrics import NodeCollector, serve_metrics

        collector = NodeCollector(
            lambda: server.stats({}, [])[0], server.traffic, store.snapshot_id
        )
        metrics = serve_metrics(collector, metrics_port, metrics_host)
        print(f"storage node metrics on http://{metrics_host}:{metrics}/metrics", flush=True)
    if ready_file:  # written whole, then renamed: a launcher polling for it never reads half a file
        tmp = Path(f"{ready_file}.tmp")
        ready = {"port": server.port, "pid": os.getpid(), "metrics_port": metrics}
        tmp.write_text(json.dumps(ready))
        os.replace(tmp, ready_file)
    print(
        f"storage node serving {store.location.uri} ({store.manifest.get('rows')} rows) on "
        f"{location}",
        flush=True,
    )
    server.serve()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dfs-cer storage-node serve")
    parser.add_argument("--data", required=True)
    parser.add_argument(
        "--port", type=int, default=None, help="default: storage.port (0: any free port)"
    )
    parser.add_argument("--host", default=None)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--memory-budget", default=None)
    parser.add_argument("--tls-cert", default=None)
    parser.add_argument("--tls-key", default=None)
    parser.add_argument("--ready-file", default=None, help="write the bound port here once serving")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics at http://HOST:PORT/metrics (0: any free port)",
    )
    parser.add_argument(
        "--metrics-host", default="127.0.0.1", help="the metrics endpoint's address [127.0.0.1]"
    )
    parser.add_argument(
        "--log-level",
        default=DEFAULT_LEVEL,
        type=str.upper,
        choices=LEVELS,
        help=f"log calls and errors at this level and above on stderr (default: {DEFAULT_LEVEL})",
    )
    args = parser.parse_args(argv)
    hide()  # before the store loads pyarrow.dataset (see storage_node.lean)
    tune_memory()
    configure(args.log_level)
    try:
        serve(
            args.data,
            args.port,
            args.token_file,
            args.memory_budget,
            args.host,
            args.tls_cert,
            args.tls_key,
            args.ready_file,
            args.metrics_port,
            args.metrics_host,
        )
    except DfsCerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code or 1)


if __name__ == "__main__":
    main()
