"""Every ref a campaign owns, built and parsed in one place (the model is DVC's `ExpRefInfo`).

    refs/heads/campaign/NAME/main                the accepted line
    refs/heads/campaign/NAME/round-N             round N's branch
    refs/campaign/NAME/rejected/round-N          the pin that keeps a rejected round's commit
    refs/campaign/NAME/heat/round-N              round N is in the open heat (it names the heat's base)

`str(ref)` is the full ref name, `ref.branch` the short name of a branch, and
`CampaignRef.from_ref` reads either form back (None for anything else).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gitcampaign.vocabulary import StrEnum

HEADS = "refs/heads/"
NAMESPACE = "campaign"
# Where pull and import keep what they fetched (`refs/campaign-remote/LABEL/...`); an import's label
# names its process and thread (`_import-PID-THREAD`), so that a killed one's refs are recognised.
TRACKING = "refs/campaign-remote"
IMPORT_LABEL = "_import-"


def import_pid(label: str) -> int | None:
    """The process an import's tracking label names; None for a label that is not an import's."""
    if not label.startswith(IMPORT_LABEL):
        return None
    pid = label[len(IMPORT_LABEL) :].split("-", 1)[0]
    return int(pid) if pid.isdigit() else 0


# Round 1 is the baseline, so a round branch or pin is round 2 or later, written without leading
# zeros (`round-02` would be a second name for round 2), and within MAX_ROUND: a ref named otherwise
# (by hand, or brought by a pull) is no round of the campaign.
MAX_ROUND = 999_999
_ROUND = re.compile(r"round-([1-9][0-9]{0,5})")


class RefKind(StrEnum):
    MAIN = "main"
    ROUND = "round"
    REJECTED = "rejected"
    HEAT = "heat"


# The kinds kept under `refs/campaign/NAME/KIND/round-N` (no branch): {path component: kind}.
_PINNED = {RefKind.REJECTED.value: RefKind.REJECTED, RefKind.HEAT.value: RefKind.HEAT}


@dataclass(frozen=True)
class CampaignRef:
    campaign: str
    kind: RefKind
    round: int | None = None

    @classmethod
    def main(cls, campaign: str) -> CampaignRef:
        return cls(campaign, RefKind.MAIN)

    @classmethod
    def round_branch(cls, campaign: str, number: int) -> CampaignRef:
        return cls(campaign, RefKind.ROUND, number)

    @classmethod
    def rejected(cls, campaign: str, number: int) -> CampaignRef:
        return cls(campaign, RefKind.REJECTED, number)

    @classmethod
    def heat(cls, campaign: str, number: int) -> CampaignRef:
        return cls(campaign, RefKind.HEAT, number)

    def __str__(self) -> str:
        if self.kind in _PINNED.values():
            return f"refs/{NAMESPACE}/{self.campaign}/{self.kind}/round-{self.round}"
        return HEADS + self.branch

    @property
    def branch(self) -> str:
        """The short branch name (`campaign/NAME/main`); a rejection pin is no branch."""
        if self.kind == RefKind.MAIN:
            return f"{NAMESPACE}/{self.campaign}/main"
        if self.kind == RefKind.ROUND:
            return f"{NAMESPACE}/{self.campaign}/round-{self.round}"
        raise ValueError(f"{self} is not a branch")

    @classmethod
    def from_ref(cls, ref: str) -> CampaignRef | None:
        """The campaign ref `ref` names, as a full ref or a short branch name; None for any other."""
        parts = (ref[len(HEADS) :] if ref.startswith(HEADS) else ref).split("/")
        if len(parts) == 3 and parts[0] == NAMESPACE and parts[1]:
            if parts[2] == "main":
                return cls.main(parts[1])
            number = _round_number(parts[2])
            return None if number is None else cls.round_branch(parts[1], number)
        if ref.startswith("refs/") and len(parts) == 5 and parts[1:2] == [NAMESPACE] and parts[3] in _PINNED:
            number = _round_number(parts[4])
            return None if number is None or not parts[2] else cls(parts[2], _PINNED[parts[3]], number)
        return None

    @staticmethod
    def owner(ref: str) -> str | None:
        """The campaign whose branch namespace holds `ref` (full or short), whatever the branch."""
        parts = (ref[len(HEADS) :] if ref.startswith(HEADS) else ref).split("/")
        return parts[1] if len(parts) >= 3 and parts[0] == NAMESPACE and parts[1] else None

    @staticmethod
    def branches_prefix(campaign: str | None = None) -> str:
        """The full-ref prefix of every campaign branch, or of one campaign's branches."""
        return f"{HEADS}{NAMESPACE}/" + (f"{campaign}/" if campaign else "")

    @staticmethod
    def rejected_prefix(campaign: str) -> str:
        return f"refs/{NAMESPACE}/{campaign}/{RefKind.REJECTED}/"

    @staticmethod
    def heat_prefix(campaign: str) -> str:
        return f"refs/{NAMESPACE}/{campaign}/{RefKind.HEAT}/"


def _round_number(name: str) -> int | None:
    match = _ROUND.fullmatch(name)
    return int(match.group(1)) if match and int(match.group(1)) >= 2 else None
