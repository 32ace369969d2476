"""The options of the pull strategies, validated once (a misspelled option is an error, never
silently ignored)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from dfs_cer.errors import ConfigError
from dfs_cer.plan.cost import MODELS


@dataclass(frozen=True, slots=True)
class PullOptions:
    """What the cost-model-driven strategies (dfs and its ablations) read; the others take the
    same options and need none of them, so one set of options runs every strategy."""

    #: how round trips are chosen: adaptive (the paper's cost model), always_on, always_off,
    #: naive or fixed
    cost_model: str = "adaptive"
    #: measured engine and network rates (``dfs-cer calibrate``); None: the built-in defaults
    calibration_file: str | None = None
    #: false-positive rate of each window-wise join filter
    target_fpr: float = 0.02
    #: passes over the variables (> 1: verify every variable again against the shrunk set)
    passes: int = 2
    #: misestimate the network rate by this factor (an ablation of the cost model)
    rate_scale: float = 1.0
    #: where PARTITION BY groups lie whole on single storage nodes, match there and ship only the
    #: result: "auto" (the cost model weighs node CPU against bytes), "on" (whenever possible) or
    #: "off" (always pull events)
    node_matching: str = "auto"

    @classmethod
    def parse(cls, options: dict[str, Any]) -> PullOptions:
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise ConfigError(
                f"unknown pull option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                f"the options are {', '.join(names)}"
            )
        out = cls(**options)
        if out.cost_model not in MODELS:
            raise ConfigError(
                f"cost_model must be one of {', '.join(MODELS)}, got {out.cost_model!r}"
            )
        if isinstance(out.target_fpr, bool) or not (
            isinstance(out.target_fpr, int | float) and 0 < out.target_fpr < 1
        ):
            raise ConfigError(f"target_fpr must be in (0, 1), got {out.target_fpr!r}")
        if (
            isinstance(out.passes, bool)
            or not isinstance(out.passes, int)
            or not 1 <= out.passes <= 16
        ):
            raise ConfigError(f"passes must be 1 to 16, got {out.passes!r}")
        if out.calibration_file is not None and not isinstance(out.calibration_file, str):
            raise ConfigError(f"calibration_file must be a path, got {out.calibration_file!r}")
        if isinstance(out.rate_scale, bool) or not (
            isinstance(out.rate_scale, int | float)
            and math.isfinite(out.rate_scale)
            and out.rate_scale > 0
        ):
            raise ConfigError(f"rate_scale must be a positive number, got {out.rate_scale!r}")
        if out.node_matching not in NODE_MATCHING:
            raise ConfigError(
                f"node_matching must be one of {', '.join(NODE_MATCHING)}, got "
                f"{out.node_matching!r}"
            )
        return out


NODE_MATCHING = ("auto", "on", "off")
