"""A storage node's metrics in the Prometheus text format (``--metrics-port``): queries open,
admitted, refused and waiting, bytes in and out per action, memory held and budgeted, the
snapshot served, errors by code. Read on each scrape from the node's own counters; the endpoint
serves nothing but these numbers (no query ids, no data), on loopback unless told otherwise."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from storage_node.traffic import Traffic


class NodeCollector(Collector):
    """The metrics of one node: ``stats()`` (the ``stats`` action's counters), its traffic and
    the snapshot it serves, read at each scrape."""

    def __init__(
        self,
        stats: Callable[[], dict[str, Any]],
        traffic: Traffic,
        snapshot: Callable[[], int | None],
    ) -> None:
        self.stats = stats
        self.traffic = traffic
        self.snapshot = snapshot

    def collect(self) -> Iterator[Any]:
        s = self.stats()
        gauges = (
            ("queries_open", "Queries holding state or a reservation on the node", "queries"),
            ("queries_waiting", "Queries waiting for room (admission)", "waiting"),
            ("memory_held_bytes", "Bytes reserved by open queries", "held_bytes"),
            ("memory_budget_bytes", "The node's memory budget", "budget_bytes"),
            ("work_bytes", "Bytes node-side computations hold now", "work_bytes"),
            ("cached_bytes", "Rows cached in memory", "cached_bytes"),
            ("index_bytes", "Value indexes held in memory", "index_bytes"),
        )
        for name, text, key in gauges:
            yield GaugeMetricFamily(f"dfs_cer_node_{name}", text, value=float(s.get(key) or 0))
        if s.get("resident_bytes") is not None:
            yield GaugeMetricFamily(
                "dfs_cer_node_resident_bytes",
                "Resident memory of the node process",
                value=float(s["resident_bytes"]),
            )
        counters = (
            ("queries_admitted", "Queries granted room", "admitted"),
            (
                "queries_refused",
                "Queries refused room (memory budget, too many waiting)",
                "refused",
            ),
            ("queries_evicted", "Reservations dropped when their lease ended", "evicted"),
            (
                "computations_stopped",
                "Node-side computations stopped at a deadline or close",
                "stopped",
            ),
        )
        for name, text, key in counters:
            yield CounterMetricFamily(f"dfs_cer_node_{name}", text, value=float(s.get(key) or 0))
        snapshot = self.snapshot()
        if snapshot is not None:
            info = GaugeMetricFamily(
                "dfs_cer_node_snapshot",
                "The Iceberg snapshot the node serves (its id as a label; value 1)",
                labels=["snapshot"],
            )
            info.add_metric([str(snapshot)], 1.0)
            yield info
        calls, bytes_in, bytes_out, errors = self.traffic.snapshot()
        for name, text, values in (
            ("calls", "Calls served, by action", calls),
            ("bytes_in", "Request bytes received, by action", bytes_in),
            ("bytes_out", "Reply bytes sent, by action", bytes_out),
        ):
            family = CounterMetricFamily(f"dfs_cer_node_{name}", text, labels=["action"])
            for action, value in sorted(values.items()):
                family.add_metric([action], float(value))
            yield family
        family = CounterMetricFamily(
            "dfs_cer_node_errors", "Calls that failed, by error code", labels=["code"]
        )
        for code, value in sorted(errors.items()):
            family.add_metric([code], float(value))
        yield family


def serve_metrics(collector: NodeCollector, port: int, host: str = "127.0.0.1") -> int:
    """Serve ``collector`` at http://host:port/metrics in a background thread; the bound port."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    server, _ = start_http_server(port, addr=host, registry=registry)
    return int(server.server_port)
