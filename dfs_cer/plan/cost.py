"""The round-trip cost model (paper §IV-C; reference notes §4).

Before a variable's round trip(s) the compute node compares

- benefit = Δℓ·r·S_e/(M·R) + β·Δℓ·r: fewer events to transfer and to match, with
  Δℓ = ℓ·e^{-λw} (head/tail) or ℓ·e^{-2λw} (middle; λ/5 when the variable has an equality
  with a processed one), r the events per time unit of the candidate variables;
- harm = (n_v·C_p1 + ℓ·λ·H·C_p2 + K·C_b)/M + 2·(|SWF| + |WJF|)/R: verification, WJF build,
  and the filters on the wire both ways;

and starts the round trip iff benefit >= harm. All times in seconds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODELS = ("adaptive", "always_on", "always_off", "naive", "fixed")

#: the reference code's constants (ns per event, bytes per ns), used by "fixed" and as defaults
FIXED = {"c_p1": 16.3e-9, "c_p2": 156.5e-9, "c_b": 132.5e-9, "rate_bytes_per_s": 0.1e9, "beta": 200e-9}


@dataclass
class CostInputs:
    variable: str
    middle: bool
    count: int  # candidate events of the variable (all nodes)
    span: float  # time span of the data (ORDER BY units)
    window: int
    covered: float  # ℓ, covered length of the current interval set
    event_rate: float  # candidate events (all variables) per time unit
    equalities: int  # H
    join_keys: int  # K, (value, window) pairs to put in join filters
    swf_bytes: int
    wjf_bytes: int
    nodes: int
    event_bytes: float  # S_e


@dataclass
class Decision:
    variable: str
    model: str
    run: bool
    benefit_s: float
    harm_s: float
    reduced_events: float

    def to_dict(self) -> dict[str, Any]:
        return {"variable": self.variable, "model": self.model, "run": self.run, "benefit_s": self.benefit_s,
                "harm_s": self.harm_s, "reduced_events": self.reduced_events}


@dataclass
class CostModel:
    model: str = "adaptive"
    constants: dict[str, float] = field(default_factory=lambda: dict(FIXED))

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            from dfs_cer.errors import ConfigError

            raise ConfigError(f"cost model must be one of {', '.join(MODELS)}, got {self.model!r}")

    @classmethod
    def load(cls, model: str, calibration_file: str | None = None) -> CostModel:
        constants = dict(FIXED)
        if model == "adaptive" and calibration_file and Path(calibration_file).is_file():
            data = json.loads(Path(calibration_file).read_text())
            constants.update({k: float(v) for k, v in data.get("constants", {}).items() if k in FIXED})
        return cls(model, constants)

    def observe_transfer(self, nbytes: int, seconds: float) -> None:
        """Update the network rate R from a transfer (adaptive model only)."""
        if self.model == "adaptive" and nbytes > 64 * 1024 and seconds > 0:
            self.constants["rate_bytes_per_s"] = 0.5 * self.constants["rate_bytes_per_s"] + 0.5 * nbytes / seconds

    def decide(self, x: CostInputs) -> Decision:
        lam = x.count / max(x.span, 1.0)
        if x.equalities:
            lam *= 0.2  # an equality keeps about a fifth of the events (reference constant)
        exponent = (2 if x.middle else 1) * lam * x.window
        shrink = math.exp(-exponent)  # share of ℓ a round trip is expected to remove
        reduced = shrink * x.covered * x.event_rate
        c = self.constants
        rate = c["rate_bytes_per_s"]
        benefit = reduced * x.event_bytes / max(1, x.nodes) / rate + c["beta"] * reduced
        harm = (x.count * c["c_p1"] + x.covered * lam * x.equalities * c["c_p2"] + x.join_keys * c["c_b"]) / max(
            1, x.nodes) + 2 * (x.swf_bytes + x.wjf_bytes) / rate
        if self.model == "always_on":
            run = True
        elif self.model == "always_off":
            run = False
        elif self.model == "naive":
            run = shrink > 0.15
        else:
            run = benefit >= harm
        return Decision(x.variable, self.model, run, benefit, harm, reduced)
