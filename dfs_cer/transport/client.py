"""Flight client for one storage node, with payload byte accounting."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from dfs_cer.errors import StorageError
from dfs_cer.transport.messages import decode, encode


@dataclass
class Transfer:
    action: str
    bytes_to_sn: int
    bytes_to_cn: int
    seconds: float


@dataclass
class StorageClient:
    endpoint: str
    token: str
    transfers: list[Transfer] = field(default_factory=list)
    timeout: float = 180.0
    tls_root_certs: bytes | None = None

    def __post_init__(self) -> None:
        location = self.endpoint if "://" in self.endpoint else f"grpc+tcp://{self.endpoint}"
        kwargs = {"tls_root_certs": self.tls_root_certs} if self.tls_root_certs else {}
        self._client = flight.FlightClient(location, **kwargs)
        self._options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {self.token}".encode())],
                                                 timeout=self.timeout)

    def __getstate__(self) -> dict[str, Any]:  # picklable for Spark: reconnect lazily
        return {"endpoint": self.endpoint, "token": self.token, "transfers": [], "timeout": self.timeout,
                "tls_root_certs": self.tls_root_certs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    def action(self, name: str, header: dict[str, Any] | None = None,
               blobs: list[bytes] | None = None) -> tuple[dict[str, Any], list[bytes]]:
        body = encode(header or {}, blobs)
        start = time.perf_counter()
        try:
            results = list(self._client.do_action(flight.Action(name, body), options=self._options))
        except flight.FlightError as exc:
            raise StorageError(f"storage node {self.endpoint} refused {name}: {exc}") from exc
        raw = results[0].body.to_pybytes() if results else b""
        self.transfers.append(Transfer(name, len(body), len(raw), time.perf_counter() - start))
        return decode(raw)

    def pull(self, header: dict[str, Any], blobs: list[bytes] | None = None) -> pa.Table:
        ticket = encode(header, blobs)
        start = time.perf_counter()
        try:
            table = self._client.do_get(flight.Ticket(ticket), options=self._options).read_all()
        except flight.FlightError as exc:
            raise StorageError(f"storage node {self.endpoint} refused {header.get('kind')}: {exc}") from exc
        self.transfers.append(Transfer(str(header.get("kind")), len(ticket), table.nbytes, time.perf_counter() - start))
        return table

    def upload(self, header: dict[str, Any], table: pa.Table) -> None:
        """DoPut ``table`` (push-pull: a processed variable's events)."""
        command = encode(header)
        start = time.perf_counter()
        try:
            writer, _ = self._client.do_put(flight.FlightDescriptor.for_command(command), table.schema,
                                            options=self._options)
            writer.write_table(table)
            writer.close()
        except flight.FlightError as exc:
            raise StorageError(f"storage node {self.endpoint} refused the upload: {exc}") from exc
        self.transfers.append(Transfer("upload", len(command) + table.nbytes, 0, time.perf_counter() - start))

    def close(self) -> None:
        self._client.close()
