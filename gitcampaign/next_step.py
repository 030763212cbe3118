"""The loop's next step from where a campaign stands: what `git campaign next` prints or performs
(`loop`), and what `status` words its own way. Read only."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign.campaign import opened
from gitcampaign.lineage import LineageRow, lineage_rows, termination
from gitcampaign.vocabulary import Status

STEP_PREPARE = "prepare"
STEP_BASELINE = "baseline"  # performed as prepare (idempotent), then the baseline
STEP_VALIDATE = "validate"
STEP_COMMIT = "commit"  # a person edits and commits: nothing to run
STEP_ROUND = "round"  # needs a hypothesis
STEP_REPORT = "report"
STEP_DONE = "done"


@dataclass
class NextStep:
    campaign: str
    step: str
    command: str
    why: str
    runnable: bool  # whether `--run` can perform it without more input

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def next_step(repo_path: Path, campaign_name: str | None) -> NextStep:
    campaign = opened(repo_path, campaign_name)
    manifest = campaign.manifest()
    if manifest.csv_header is None:
        return decide(campaign.name, False, [], False, [])
    _, rows = lineage_rows(campaign)
    return decide(campaign.name, True, rows, campaign.reported(), termination(manifest, rows))


def decide(
    name: str, has_baseline: bool, rows: list[LineageRow], reported: bool, reached: list[str]
) -> NextStep:
    """The next step from where the campaign stands (`status` words the same decision its own way)."""
    if not has_baseline:
        return NextStep(
            name,
            STEP_BASELINE,
            "git campaign prepare && git campaign baseline",
            "the campaign has no baseline yet",
            True,
        )
    last = rows[-1] if rows and rows[-1].round >= 2 else None
    if last and last.status in (Status.OPEN, Status.PENDING):
        why = (
            "an interrupted validate noted a decision that is not applied yet"
            if last.status == Status.PENDING
            else f"round {last.round} is committed and not validated"
        )
        return NextStep(name, STEP_VALIDATE, "git campaign validate", why, True)
    if last and last.status == Status.EMPTY:
        return NextStep(
            name,
            STEP_COMMIT,
            "edit, then `git commit` (Hypothesis:/Change: lines)",
            f"round {last.round} is open without its change",
            False,
        )
    if reported:
        return NextStep(
            name,
            STEP_DONE,
            "git campaign report --html  (review it)",
            f"the campaign is reported ({C.campaign_dir(name)}/{C.REPORT_FILE})",
            False,
        )
    if reached:
        return NextStep(name, STEP_REPORT, "git campaign report", "; ".join(reached), True)
    return NextStep(
        name,
        STEP_ROUND,
        'git campaign round -m "HYPOTHESIS"',
        "the last round is decided and the next needs its hypothesis: `git campaign next --run -m IDEA`",
        False,
    )
