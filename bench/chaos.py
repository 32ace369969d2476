"""Chaos: queries of every strategy while storage nodes are killed, hung, restarted, their S3
store fails or their memory budget is held by others; every outcome classified.

Command:  .venv/bin/python bench/chaos.py [--queries 200] [--events 60000] [--seed 0] [--json PATH]
Hardware: 3 storage node processes reading their shards from moto's S3 server (a real HTTP
          endpoint, in this process; the nodes' cache is off so every open reads S3) and the
          compute node on one machine, over loopback.
Runtime:  about 5-8 minutes for 200 queries.
Output:   per fault kind and in all: queries that returned exactly the local engine's matches
          (correct), failed with a clear error (a DfsCerError naming the round and the node or
          the store), returned wrong matches (must be 0), failed unclearly (must be 0), left state
          on some node once the faults were repaired (must be 0), and the worst time to an error
          (must be <= the query deadline + 5 s).

Faults, each at a random round of the query (before it goes out) on a random node:
  kill     SIGKILL (restarted after the query)
  stop     SIGSTOP (resumed after the query: its late calls must keep nothing)
  restart  killed and restarted on the same port mid-query (the query re-opens it once)
  s3-deny  the S3 store refuses every request (access denied: fails at once, no retries)
  s3-down  the S3 server goes away (transient: retried within storage.s3_retry_seconds)
  pressure another query holds the nodes' memory budget for 0.5-6 s (admission waits or refuses)
  none     no fault

Attacks on a node's bounds (``--attacks``; one storage node on local disk, see bench/attacks.py):
  .venv/bin/python bench/chaos.py --attacks [--rows 400] [--lease 2] [--json PATH]
push_pull, node_matches, like and abandoned, each measured: seconds the node worked past the
query's deadline (or its close), node CPU in the 2 s after, peak RSS, other queries' reserve
latency during the attack and the next query's latency after it. Runtime: about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq

from dfs_cer import match_recognize
from dfs_cer.config import StorageConfig, StrategyConfig
from dfs_cer.datasets import synthetic_events
from dfs_cer.errors import DfsCerError
from dfs_cer.io.shard import shard
from dfs_cer.strategies import STRATEGIES, pull
from dfs_cer.strategies.base import CLOSER, Session
from dfs_cer.strategies.matching import match_pulled
from dfs_cer.transport.client import StorageClient
from dfs_cer.transport.replies import CloseReply, ReserveReply, StatsReply
from storage_node.launcher import LocalCluster

FAULTS = ("none", "kill", "stop", "restart", "s3-deny", "s3-down", "pressure")
CONFIG = StrategyConfig(
    call_timeout_seconds=2.0,
    query_timeout_seconds=10.0,
    close_timeout_seconds=0.5,
    admission_wait_seconds=3.0,
)
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
QUERIES = [
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, C.ts AS c_ts ALL MATCHES "
    "PATTERN (A B C) WITHIN INTERVAL '30' SECOND DEFINE A AS A.type = 'T_02', B AS B.type = 'T_15' "
    "AND B.a2 = A.a2, C AS C.type = 'T_09' AND C.a1 < 500)",
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.ts AS a_ts, B.ts AS b_ts ONE "
    "ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A N*? B) WITHIN INTERVAL '20' "
    "SECOND DEFINE A AS A.type = 'T_03', B AS B.type = 'T_07' AND B.a1 > A.a1)",
]


def rows(table: Any) -> list[str]:
    return sorted(map(str, table.to_pylist()))


class S3:
    """moto's S3 server in this process, stoppable and restartable on its port."""

    def __init__(self) -> None:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log

        os.environ.update(CREDENTIALS)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        self.host, self.port = self.server.get_host_and_port()
        self.endpoint = f"http://{self.host}:{self.port}"

    def down(self) -> None:
        self.server.stop()

    def up(self) -> None:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()

    @staticmethod
    def deny(on: bool) -> None:
        from moto import settings
        from moto.core.responses import ActionAuthenticatorMixin

        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0 if on else float("inf")
        ActionAuthenticatorMixin.request_count = 0


def held(cluster: LocalCluster) -> list[int]:
    out = []
    for e in cluster.endpoints:
        c = StorageClient(e, cluster.token, timeout=5)
        try:
            s = c.call(StatsReply)[0]
            out.append(s.queries + s.held_bytes + s.reservations)
        finally:
            c.close()
    return out


def clean(cluster: LocalCluster, within: float) -> bool:
    give_up = time.monotonic() + within
    while any(held(cluster)):
        if time.monotonic() > give_up:
            return False
        time.sleep(0.2)
    return True


def clear(message: str) -> bool:
    """A clear error names the round and what failed (a node, the store or the admission)."""
    return message.startswith("round ") and any(
        w in message for w in ("storage node", "cannot read", "no room", "refused")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--events", type=int, default=60_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the figures (and every outcome) here")
    parser.add_argument(
        "--attacks", action="store_true", help="run the attacks on a node's bounds instead"
    )
    parser.add_argument("--rows", type=int, default=400, help="--attacks: events per type")
    parser.add_argument(
        "--lease", type=float, default=2.0, help="--attacks: the attacked query's deadline (s)"
    )
    args = parser.parse_args()
    if args.attacks:
        attacks(args.rows, args.lease, args.json)
        return
    rng = random.Random(args.seed)
    s3 = S3()
    import boto3

    boto3.client("s3", endpoint_url=s3.endpoint).create_bucket(Bucket="chaos")
    events = synthetic_events(args.events, seed=args.seed)
    expected = {}
    with tempfile.TemporaryDirectory() as tmp:
        pq.write_table(events, Path(tmp) / "events.parquet")
        shard(
            str(Path(tmp) / "events.parquet"),
            3,
            "s3://chaos/events",
            config=StorageConfig(s3_endpoint=s3.endpoint),
            name="t",
        )
        for q in QUERIES:
            expected[q] = rows(match_recognize(events, q))
    env = {
        **CREDENTIALS,
        "DFS_CER__STORAGE__S3_ENDPOINT": s3.endpoint,
        "DFS_CER__STORAGE__CACHE_BYTES": "0",
        "DFS_CER__STORAGE__S3_RETRY_SECONDS": "3",
        "DFS_CER__STORAGE__S3_REQUEST_TIMEOUT_SECONDS": "2",
    }
    outcomes: list[dict[str, Any]] = []
    original = Session.all
    with LocalCluster(
        [f"s3://chaos/events/node-{i:02d}" for i in range(3)], env=env, memory_budget="16MiB"
    ) as cluster:
        budget_hog = {"id": 0}
        for n in range(args.queries):
            strategy = rng.choice(list(STRATEGIES))
            sql = rng.choice(QUERIES)
            fault = FAULTS[n % len(FAULTS)] if n < len(FAULTS) else rng.choice(FAULTS)
            node = rng.randrange(3)
            at = (
                rng.randint(1, 3) if fault in ("kill", "stop", "restart") else 1
            )  # every strategy has >= 3
            repair: list[Any] = []

            def inject(fault: str = fault, node: int = node, repair: list[Any] = repair) -> None:
                if fault == "kill":
                    cluster.kill(node)
                    repair.append(lambda: cluster.restart(node))
                elif fault == "stop":
                    cluster.pause(node)
                    repair.append(lambda: cluster.resume(node))
                elif fault == "restart":
                    cluster.restart(node)
                elif fault == "s3-deny":
                    S3.deny(True)
                    repair.append(lambda: S3.deny(False))
                elif fault == "s3-down":
                    s3.down()
                    repair.append(s3.up)
                elif (
                    fault == "pressure"
                ):  # fill every node's budget with reservations of other queries
                    hogs: list[tuple[StorageClient, str]] = []
                    for e in cluster.endpoints:
                        c = StorageClient(e, cluster.token)
                        for _ in range(500):
                            budget_hog["id"] += 1
                            hog = f"hog-{budget_hog['id']}"
                            granted = c.call(
                                ReserveReply, {"query_id": hog, "arrival": time.time()}
                            )[0].granted
                            hogs.append((c, hog))
                            if not granted:
                                break

                    def release(hogs: list[tuple[StorageClient, str]] = hogs) -> None:
                        for c, hog in hogs:
                            c.call(CloseReply, {"query_id": hog})
                        for c in {id(c): c for c, _ in hogs}.values():
                            c.close()

                    timer = threading.Timer(rng.uniform(0.5, 6.0), release)
                    timer.start()
                    repair.append(timer.join)

            fired = [False]

            def all_(
                self: Session,
                name: str,
                fn: Any,
                *a: Any,
                inject: Any = inject,
                fired: list[bool] = fired,
                at: int = at,
                **kw: Any,
            ) -> Any:
                if not fired[0] and len(self.trace.rounds) + 1 >= at:
                    fired[0] = True
                    inject()
                return original(self, name, fn, *a, **kw)

            Session.all = all_  # type: ignore[method-assign]
            began = time.monotonic()
            outcome: dict[str, Any] = {
                "n": n,
                "strategy": strategy,
                "fault": fault,
                "node": node,
                "round": at,
            }
            try:
                result = pull(strategy, sql, cluster.endpoints, cluster.token, config=CONFIG)
                got = rows(match_pulled(result))
                outcome["result"] = "correct" if got == expected[sql] else "wrong"
                outcome["warnings"] = result.trace.warnings
            except DfsCerError as exc:
                outcome["result"] = "clear error" if clear(str(exc)) else "unclear error"
                outcome["error"] = str(exc)[:300]
            except Exception as exc:
                outcome["result"] = "unclear error"
                outcome["error"] = f"{type(exc).__name__}: {exc}"[:300]
            finally:
                Session.all = original  # type: ignore[method-assign]
            outcome["seconds"] = time.monotonic() - began
            outcome["fired"] = fired[0]
            for step in repair:
                step()
            outcome["leaked"] = not clean(cluster, within=CONFIG.query_timeout_seconds)
            outcomes.append(outcome)
            mark = {"correct": ".", "clear error": "e", "wrong": "W", "unclear error": "?"}[
                outcome["result"]
            ]
            print(mark + ("L" if outcome["leaked"] else ""), end="", flush=True)
            if outcome["result"] in ("wrong", "unclear error") or outcome["leaked"]:
                print(f"\n{outcome}", flush=True)
    print()
    summary = summarize(outcomes)
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "summary": summary,
                    "outcomes": outcomes,
                    "deadline_seconds": CONFIG.query_timeout_seconds,
                    "call_timeout_seconds": CONFIG.call_timeout_seconds,
                    "queries": args.queries,
                    "events": args.events,
                    "seed": args.seed,
                },
                indent=1,
            )
        )
    CLOSER.pending()


def attacks(rows: int, lease: float, json_path: str | None) -> None:
    """Each attack of bench/attacks.py against one node holding ``4 rows`` events of 2,000
    characters each (the LIKE attack's strings)."""
    from bench.attacks import ATTACKS, attack_table, run_attack

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        pq.write_table(attack_table(rows, text=2000), Path(tmp) / "events.parquet")
        shard(
            str(Path(tmp) / "events.parquet"),
            1,
            str(Path(tmp) / "nodes"),
            time_column="ts",
            name="t",
        )
        with LocalCluster([str(Path(tmp) / "nodes" / "node-00")]) as cluster:
            for attack in ATTACKS:
                outcome = run_attack(
                    cluster.endpoints[0], cluster.token, cluster.procs[0].pid, attack, lease=lease
                )
                out.append(outcome.as_dict())
                print(json.dumps(outcome.as_dict()), flush=True)
    if json_path:
        Path(json_path).write_text(
            json.dumps({"rows": rows, "lease_seconds": lease, "attacks": out}, indent=1)
        )


def summarize(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, Counter[str]] = defaultdict(Counter)
    worst: dict[str, float] = defaultdict(float)
    for o in outcomes:
        for key in (o["fault"], "all"):
            per[key][o["result"]] += 1
            per[key]["leaked"] += int(o["leaked"])
            per[key]["queries"] += 1
            if o["result"] != "correct":
                worst[key] = max(worst[key], o["seconds"])
    return {
        k: {
            **{
                r: per[k][r]
                for r in ("queries", "correct", "clear error", "wrong", "unclear error", "leaked")
            },
            "worst_seconds_to_error": round(worst[k], 2),
        }
        for k in (*FAULTS, "all")
        if k in per
    }


if __name__ == "__main__":
    main()
