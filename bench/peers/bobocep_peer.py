"""bobocep: skip-till-next-match (each qualifying A starts a run; first B after it, first C
after that B with the same a2; the run halts at the first event more than W after A)."""

import time

from bobocep.cep.action import BoboActionHandlerBlocking
from bobocep.cep.engine.decider.pubsub import BoboDeciderSubscriber
from bobocep.cep.event import BoboEventSimple
from bobocep.cep.phenom import BoboPatternBuilder, BoboPhenomenon
from bobocep.setup import BoboSetupSimple
from common import W, args, read_events, write_result


def ok(e, t):  # completed complex events are fed back into the stream: ignore them
    return isinstance(e, BoboEventSimple) and e.data["type"] == t and e.data["a1"] <= 200


class Collector(BoboDeciderSubscriber):
    def __init__(self):
        self.triples = []

    def on_decider_update(self, completed, halted, updated, local):
        for run in completed:
            self.triples.append(tuple(run.history.group(g)[0].timestamp for g in "ABC"))


def run(events):
    pattern = (
        BoboPatternBuilder("abc")
        .followed_by(lambda e, h: ok(e, "T_01"), group="A")
        .followed_by(lambda e, h: ok(e, "T_02"), group="B")
        .followed_by(
            lambda e, h: ok(e, "T_03") and e.data["a2"] == h.group("B")[0].data["a2"], group="C"
        )
        .haltcondition(
            lambda e, h: isinstance(e, BoboEventSimple) and e.timestamp - h.first().timestamp > W
        )
        .generate()
    )
    engine = BoboSetupSimple(
        phenomena=[BoboPhenomenon("abc_phenom", [pattern])], handler=BoboActionHandlerBlocking()
    ).generate()
    collector = Collector()
    engine.decider.subscribe(collector)
    for i, e in enumerate(events):
        engine.receiver.add_data(BoboEventSimple(event_id=str(i), timestamp=e["ts"], data=e))
        engine.update()
    engine.close()
    return collector.triples


if __name__ == "__main__":
    events_path, out_path, _ = args()
    events = read_events(events_path)
    start = time.perf_counter()
    triples = run(events)
    write_result(out_path, "bobocep", "skip_till_next_match", triples, time.perf_counter() - start)
