"""Measurement sessions a `validate` finished without a decision, kept for the next `validate` of the
same round (validate measures, `status` names them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import envinfo, verdict
from gitcampaign import git as g
from gitcampaign.campaign import Campaign
from gitcampaign.decision import PairSample
from gitcampaign.manifest import Manifest


def kept_path(campaign: Campaign, number: int) -> Path:
    return g.common_dir(campaign.repo) / "campaign" / "sessions" / campaign.name / f"round-{number}.json"


@dataclass
class KeptSessions:
    """The measurement sessions a validate has finished without a decision, kept in the common git dir
    so that a validate stopped by a command's time limit (a lent GPU's 10 minutes) or a crash goes on
    where it stopped instead of measuring them again. They count only for the same round, commits,
    shapes, pairs, metric, harness command and machine (the environment fingerprint); the build and
    the tests always run again."""

    path: Path
    key: dict[str, Any]

    @classmethod
    def of(
        cls,
        campaign: Campaign,
        number: int,
        commits: dict[str, str],
        labels: list[str],
        pairs: int,
        manifest: Manifest,
    ) -> KeptSessions:
        key = {
            "incumbent": commits[C.INCUMBENT],
            "candidate": commits[C.CANDIDATE],
            "shapes": labels,
            "pairs": pairs,
            "metric": manifest.primary_metric,
            "quick_command": manifest.quick_command,
            "environment": envinfo.fingerprint(),
        }
        # Through JSON once, so that it compares equal to the key a saved record reads back.
        return cls(kept_path(campaign, number), json.loads(json.dumps(key)))

    def load(self) -> tuple[list[PairSample], str]:
        """The kept samples and when they were kept; none where anything in the key differs."""
        kept = _read_kept(self.path)
        if kept is None or kept.get("key") != self.key:
            return [], ""
        found = [PairSample(s["incumbent"], s["candidate"], s["session"]) for s in kept["samples"]]
        return found, kept["kept"]

    def save(self, found: list[PairSample]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "key": self.key,
            "kept": verdict.now(),
            "samples": [
                {"session": s.session, "incumbent": s.incumbent, "candidate": s.candidate} for s in found
            ],
        }
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(record))
        partial.replace(self.path)  # whole or not at all

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)

    @staticmethod
    def summary(campaign: Campaign, number: int) -> str | None:
        """For `status`: how many sessions round `number` has kept, and since when (not checked against
        this machine: that costs the environment probe, and validate checks it)."""
        kept = _read_kept(kept_path(campaign, number))
        if kept is None:
            return None
        sessions = max(sample["session"] for sample in kept["samples"])
        return f"{sessions} measurement session{'s' if sessions > 1 else ''} kept from {kept['kept']}"


def _read_kept(path: Path) -> dict[str, Any] | None:
    """The record KeptSessions.save wrote, or None (none there, or not one of its records)."""
    try:
        kept = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    fields = {"session", "incumbent", "candidate"}
    if (
        not isinstance(kept, dict)
        or not isinstance(kept.get("kept"), str)
        or not isinstance(kept.get("samples"), list)
        or not kept["samples"]
        or not all(isinstance(sample, dict) and fields <= sample.keys() for sample in kept["samples"])
    ):
        return None
    return kept
