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

import numpy as np

MODELS = ("adaptive", "always_on", "always_off", "naive", "fixed")

#: the reference code's constants (ns per event, bytes per ns), used by "fixed" and as defaults
FIXED = {
    "c_p1": 16.3e-9,
    "c_p2": 156.5e-9,
    "c_b": 132.5e-9,
    "rate_bytes_per_s": 0.1e9,
    "beta": 200e-9,
}


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
        return {
            "variable": self.variable,
            "model": self.model,
            "run": self.run,
            "benefit_s": self.benefit_s,
            "harm_s": self.harm_s,
            "reduced_events": self.reduced_events,
        }


@dataclass
class CostModel:
    """``constants`` hold the reference values; ``tables`` (from ``dfs-cer calibrate``) map a
    constant to ``[[input size, seconds per event], ...]``, interpolated piecewise linearly."""

    model: str = "adaptive"
    constants: dict[str, float] = field(default_factory=lambda: dict(FIXED))
    tables: dict[str, list[list[float]]] = field(default_factory=dict)
    betas: dict[str, float] = field(default_factory=dict)
    #: multiplies every estimate of the network rate R (the paper's misestimated-R ablation)
    rate_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            from dfs_cer.errors import ConfigError

            raise ConfigError(f"cost model must be one of {', '.join(MODELS)}, got {self.model!r}")

    @classmethod
    def from_document(cls, model: str, data: dict[str, Any]) -> CostModel:
        """A model from a calibration document (see :func:`dfs_cer.calibrate.calibrate`)."""
        from dfs_cer.errors import ConfigError

        tables: dict[str, list[list[float]]] = {}
        for name, rows in dict(data.get("tables", {})).items():
            if name not in ("c_p1", "c_p2", "c_b"):
                raise ConfigError(
                    f"calibration table {name!r} is unknown; expected c_p1, c_p2 or c_b "
                    "(re-run dfs-cer calibrate)"
                )
            points = sorted((float(n), float(c)) for n, c in rows)
            if not points or any(c < 0 or n <= 0 for n, c in points):
                raise ConfigError(
                    f"calibration table {name!r} needs positive sizes and non-negative costs, "
                    f"got {rows!r} (re-run dfs-cer calibrate)"
                )
            tables[name] = [list(p) for p in points]
        betas = {str(k): float(v) for k, v in dict(data.get("beta", {})).items()}
        constants = dict(FIXED)
        constants.update(
            {k: float(v) for k, v in dict(data.get("constants", {})).items() if k in FIXED}
        )
        return cls(model, constants, tables, betas)

    @classmethod
    def load(
        cls, model: str, calibration_file: str | None = None, *, engine: str = "cer"
    ) -> CostModel:
        """The ``model``; "adaptive" uses this machine's calibration file when there is one."""
        from dfs_cer.errors import ConfigError

        if model == "adaptive" and calibration_file and Path(calibration_file).is_file():
            try:
                data = json.loads(Path(calibration_file).read_text())
            except (OSError, ValueError) as e:
                raise ConfigError(
                    f"calibration file {calibration_file!r} is unreadable ({e}); "
                    "re-run dfs-cer calibrate"
                ) from e
            out = cls.from_document(model, data)
            if engine in out.betas:
                out.constants["beta"] = out.betas[engine]
            return out
        return cls(model)

    def misestimate(self, factor: float) -> CostModel:
        """Scale every estimate of R by ``factor`` (> 0) from now on."""
        if not factor > 0:
            from dfs_cer.errors import ConfigError

            raise ConfigError(f"rate_scale must be > 0, got {factor!r}")
        self.rate_scale = factor
        self.constants["rate_bytes_per_s"] *= factor
        return self

    def per_event(self, name: str, n: float) -> float:
        """Seconds per event of constant ``name`` for a batch of ``n`` events."""
        table = self.tables.get(name)
        if not table or self.model != "adaptive":
            return self.constants[name]
        sizes, costs = zip(*table, strict=True)
        return float(np.interp(max(n, 1.0), sizes, costs))

    def probe(self, nbytes: int, seconds: float) -> None:
        """Set the network rate R from the first round trip of a query (adaptive model only)."""
        if self.model == "adaptive" and nbytes >= 4096 and seconds > 0:
            self.constants["rate_bytes_per_s"] = self.rate_scale * nbytes / seconds

    def observe_transfer(self, nbytes: int, seconds: float) -> None:
        """Update the network rate R from a transfer (adaptive model only)."""
        if self.model == "adaptive" and nbytes > 64 * 1024 and seconds > 0:
            self.constants["rate_bytes_per_s"] = (
                0.5 * self.constants["rate_bytes_per_s"] + 0.5 * self.rate_scale * nbytes / seconds
            )

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
        nodes = max(1, x.nodes)
        probes = x.covered * lam * x.equalities
        harm = (
            x.count * self.per_event("c_p1", x.count / nodes)
            + probes * self.per_event("c_p2", probes / nodes)
            + x.join_keys * self.per_event("c_b", x.join_keys / nodes)
        ) / nodes + 2 * (x.swf_bytes + x.wjf_bytes) / rate
        if self.model == "always_on":
            run = True
        elif self.model == "always_off":
            run = False
        elif self.model == "naive":
            run = shrink > 0.15
        else:
            run = benefit >= harm
        return Decision(x.variable, self.model, run, benefit, harm, reduced)
