"""`git campaign next [--run] [-m HYPOTHESIS]`: the next step of the loop, printed or performed.

A person's round is then two commands: edit and `git commit`, then
`git campaign next --run -m "the next hypothesis"` (validate this round, open the next one).
Steps that need a person (the edit and the commit, or a hypothesis) are never guessed.

This module and `demo_flow` sit above `commands/`: they drive several verbs in turn, and the verbs
themselves never import one another.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign.campaign import opened
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.prepare import prepare
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate
from gitcampaign.errors import CampaignError
from gitcampaign.lineage import LineageRow, lineage_rows, termination
from gitcampaign.vocabulary import Status

STEP_PREPARE = "prepare"
STEP_BASELINE = "baseline"  # performed as prepare (idempotent), then the baseline
STEP_VALIDATE = "validate"
STEP_COMMIT = "commit"  # a person edits and commits: nothing to run
STEP_ROUND = "round"  # needs a hypothesis
STEP_REPORT = "report"
STEP_DONE = "done"
STEP_REPAIR = "repair"  # a record the decisions stand on cannot be read: restore it by hand


@dataclass
class NextStep:
    campaign: str
    step: str
    command: str
    why: str
    runnable: bool  # whether `--run` can perform it without more input

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Performed:
    step: str
    result: Any  # the command's own result object


@dataclass
class NextRun:
    then: NextStep  # the step after what was performed
    performed: list[Performed] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "performed": [
                {"step": done.step, "result": dict(done.result.to_json())} for done in self.performed
            ],
            "next": asdict(self.then),
        }


def next_step(repo_path: Path, campaign_name: str | None) -> NextStep:
    campaign = opened(repo_path, campaign_name)
    manifest = campaign.manifest()
    if manifest.csv_header is None:
        return decide(campaign.name, False, [], False, [])
    problem = campaign.integrity_error()
    if problem is not None:
        return NextStep(campaign.name, STEP_REPAIR, problem.hint, problem.message, False)
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


def run_next(repo_path: Path, campaign_name: str | None, hypothesis: str | None = None) -> NextRun:
    """Perform the next step; with a hypothesis, then open the round it names."""
    performed = []
    step = next_step(repo_path, campaign_name)
    if step.step == STEP_BASELINE:
        performed.append(Performed(STEP_PREPARE, prepare(repo_path, campaign_name)))
        performed.append(Performed(STEP_BASELINE, baseline(repo_path, campaign_name)))
    elif step.step == STEP_VALIDATE:
        performed.append(Performed(STEP_VALIDATE, validate(repo_path, campaign_name)))
    elif step.step == STEP_REPORT:
        performed.append(Performed(STEP_REPORT, report(repo_path, campaign_name)))
    elif step.step in (STEP_COMMIT, STEP_DONE, STEP_REPAIR) or not hypothesis:
        hint = (
            f'git campaign next --run -m "HYPOTHESIS" opens the round ({step.command})'
            if step.step == STEP_ROUND
            else step.command
        )
        raise CampaignError(f"nothing to run: {step.why}", hint)
    step = next_step(repo_path, campaign_name)
    if hypothesis and step.step == STEP_ROUND:
        performed.append(Performed(STEP_ROUND, open_round(repo_path, campaign_name, hypothesis)))
        step = next_step(repo_path, campaign_name)
    return NextRun(step, performed)
