"""`git campaign next [--run] [-m HYPOTHESIS]`: the next step of the loop, printed or performed.

A person's round is then two commands: edit and `git commit`, then
`git campaign next --run -m "the next hypothesis"` (validate this round, open the next one).
Steps that need a person (the edit and the commit, or a hypothesis) are never guessed.

This module and `demo_flow` sit above `commands/`: they drive several verbs in turn, and the verbs
themselves never import one another. Which step comes next is `next_step`'s to say, below the verbs,
so that `status` words the same decision.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitcampaign import trust
from gitcampaign.campaign import opened
from gitcampaign.commands.analyze import analyze
from gitcampaign.commands.baseline import baseline
from gitcampaign.commands.prepare import prepare
from gitcampaign.commands.report import report
from gitcampaign.commands.round import open_round
from gitcampaign.commands.validate import validate, validate_heat
from gitcampaign.errors import CampaignError
from gitcampaign.next_step import (
    STEP_ANALYZE,
    STEP_BASELINE,
    STEP_COMMIT,
    STEP_DONE,
    STEP_PREPARE,
    STEP_REPORT,
    STEP_ROUND,
    STEP_TRUST,
    STEP_VALIDATE,
    NextStep,
    next_step,
)


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


def run_next(repo_path: Path, campaign_name: str | None, hypothesis: str | None = None) -> NextRun:
    """Perform the next step; with a hypothesis, then open the round it names."""
    performed = []
    step = next_step(repo_path, campaign_name)
    if step.step == STEP_TRUST:
        trust.require(opened(repo_path, campaign_name))
    if step.step == STEP_BASELINE:
        performed.append(Performed(STEP_PREPARE, prepare(repo_path, campaign_name)))
        performed.append(Performed(STEP_BASELINE, baseline(repo_path, campaign_name)))
    elif step.step == STEP_VALIDATE and "--heat" in step.command:
        performed.append(Performed(STEP_VALIDATE, validate_heat(repo_path, campaign_name)))
    elif step.step == STEP_VALIDATE:
        performed.append(Performed(STEP_VALIDATE, validate(repo_path, campaign_name)))
    elif step.step == STEP_REPORT:
        performed.append(Performed(STEP_REPORT, report(repo_path, campaign_name)))
    elif step.step == STEP_ANALYZE:
        performed.append(
            Performed(STEP_ANALYZE, analyze(repo_path, campaign_name, with_isa="--isa" in step.command))
        )
    elif step.step in (STEP_COMMIT, STEP_DONE) or not hypothesis:
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
