"""Device time: what each measurement cost, recorded in its verdict (`device_seconds`) and totalled
per campaign by `status` and `report`.

A measurement's device time is the wall time of the steps that run on its GPUs (the builds, the
tests, the harness and probe processes), times the GPUs it held (`--gpus`: each shard's GPU is held
for the whole measurement). The gates before it (git and the lint) run on the CPU and are not
counted. A heat splits what its candidates share (the incumbent's build and screen runs) evenly
among the candidates it measured, so the campaign's total counts every second once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gitcampaign.campaign import Campaign


@dataclass
class DeviceClock:
    """Started when the device work starts; `seconds()` is the device time spent since."""

    devices: int = 1
    started: float = field(default_factory=time.monotonic)

    def seconds(self) -> float:
        return round((time.monotonic() - self.started) * self.devices, 1)


@dataclass(frozen=True)
class DeviceTotal:
    seconds: float
    measurements: int  # verdict documents that recorded their device time

    def plus(self, seconds: float) -> DeviceTotal:
        """With one more measurement's `seconds` (one not noted yet)."""
        return DeviceTotal(round(self.seconds + seconds, 1), self.measurements + 1)

    def text(self) -> str:
        if not self.measurements:
            return "device time: none recorded yet"
        plural = "s" * (self.measurements != 1)
        return f"device time: {duration(self.seconds)} over {self.measurements} measurement{plural}"


def duration(seconds: float) -> str:
    """`1h 02m 03s`, `2m 03s`."""
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {rest:02d}s" if hours else f"{minutes}m {rest:02d}s"


def total(campaign: Campaign) -> DeviceTotal:
    """The campaign's device time: every verdict document of it that recorded `device_seconds`
    (baseline, validations, heats, report)."""
    spent = [
        float(doc.device_seconds)
        for docs in campaign.verdicts().values()
        for doc in docs
        if doc.device_seconds is not None
    ]
    return DeviceTotal(round(sum(spent), 1), len(spent))
