"""The loop's next step from where a campaign stands: what `git campaign next` prints or performs
(`loop`), and what `status` words its own way. Read only."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitcampaign import constants as C
from gitcampaign import heat as heats
from gitcampaign import profile, trust
from gitcampaign.campaign import Campaign, opened
from gitcampaign.lineage import LineageRow, rows_of, shape_limits, termination
from gitcampaign.vocabulary import Status

STEP_PREPARE = "prepare"
STEP_BASELINE = "baseline"  # performed as prepare (idempotent), then the baseline
STEP_VALIDATE = "validate"
STEP_COMMIT = "commit"  # a person edits and commits: nothing to run
STEP_ROUND = "round"  # needs a hypothesis
STEP_ANALYZE = "analyze"  # after rollbacks in a row: profile the incumbent before the next hypothesis
STEP_REPORT = "report"
STEP_DONE = "done"
STEP_TRUST = "trust"  # a person approves the commands of a campaign that came from elsewhere
STEP_REPAIR = "repair"  # a record the decisions stand on cannot be read: restore it by hand
# The handoff's rule on rollbacks in a row: after two, re-profile before the next hypothesis; after
# four, read the compiled kernels' ISA as well.
PROFILE_AFTER = 2
ISA_AFTER = 4


@dataclass(frozen=True)
class Evidence:
    """What the incumbent's profile note holds: any profile, and one that read the ISA (`--isa`)."""

    profiled: bool = False
    isa: bool = False


def evidence_of(campaign: Campaign) -> Evidence:
    docs = profile.read(campaign.repo, campaign.accepted_head())
    return Evidence(bool(docs), any("isa" in doc for doc in docs))


def rollbacks_in_a_row(rows: list[LineageRow]) -> int:
    """How many of the last decided rounds were rolled back, counting back from the latest."""
    streak = 0
    for row in reversed([row for row in rows if row.round >= 2]):
        if row.status != Status.REJECTED:
            break
        streak += 1
    return streak


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
    trusted = trust.pending(campaign) is None
    if manifest.csv_header is None:
        return choose(campaign.name, False, [], False, [], trusted=trusted)
    problem = campaign.integrity_error()
    if problem is not None:
        return NextStep(campaign.name, STEP_REPAIR, problem.hint, problem.message, False)
    baseline, rounds = campaign.lineage()
    _, rows = rows_of(baseline, rounds)
    reached = termination(manifest, rows, shape_limits(campaign, manifest))
    heat = [entry.number for entry in heats.members(campaign, rounds)]
    return choose(
        campaign.name, True, rows, campaign.reported(), reached, evidence_of(campaign), trusted, heat
    )


def choose(
    name: str,
    has_baseline: bool,
    rows: list[LineageRow],
    reported: bool,
    reached: list[str],
    evidence: Evidence = Evidence(),
    trusted: bool = True,
    heat: list[int] | None = None,
) -> NextStep:
    """The next step from where the campaign stands (`status` words the same choice its own way);
    a step that runs the campaign's commands waits for this clone's approval of them. `heat`: the
    open heat's rounds (gitcampaign.heat), decided together."""
    step = (
        _heat_step(name, rows, heat)
        if heat
        else _choose(name, has_baseline, rows, reported, reached, evidence)
    )
    if trusted or step.step not in (STEP_BASELINE, STEP_VALIDATE, STEP_REPORT, STEP_ANALYZE):
        return step
    return NextStep(
        name,
        STEP_TRUST,
        f"git campaign trust --campaign {name}",
        "this clone has not approved the campaign's commands (it came from elsewhere, or they changed):"
        f" `{step.command}` would run them; it lists them, and runs nothing until they are approved",
        False,
    )


def _heat_step(name: str, rows: list[LineageRow], heat: list[int]) -> NextStep:
    """With a heat open: commit its rounds, then validate them together."""
    empty = [row.round for row in rows if row.round in heat and row.status == Status.EMPTY]
    if empty:
        return NextStep(
            name,
            STEP_COMMIT,
            "edit, then `git commit` on each round of the heat (Hypothesis:/Change: lines); then"
            " `git campaign validate --heat`",
            f"{heats.listing(empty)} of the heat {'is' if len(empty) == 1 else 'are'} open without a change",
            False,
        )
    pending = any(row.round in heat and row.status == Status.PENDING for row in rows)
    why = (
        "an interrupted validate --heat noted decisions that are not applied yet"
        if pending
        else f"the heat of {heats.listing(heat)} is committed and not validated"
    )
    return NextStep(name, STEP_VALIDATE, "git campaign validate --heat", why, True)


def _choose(
    name: str,
    has_baseline: bool,
    rows: list[LineageRow],
    reported: bool,
    reached: list[str],
    evidence: Evidence = Evidence(),
) -> NextStep:
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
    streak = rollbacks_in_a_row(rows)
    if (streak >= PROFILE_AFTER and not evidence.profiled) or (streak >= ISA_AFTER and not evidence.isa):
        isa = streak >= ISA_AFTER
        return NextStep(
            name,
            STEP_ANALYZE,
            "git campaign analyze" + (" --isa" if isa else ""),
            f"{streak} rounds in a row were rolled back: profile the incumbent before the next hypothesis "
            "(where its time goes, how far each shape is from its limit, what bounds it)"
            + ("; and read its compiled kernels' SASS" if isa else "")
            + '; then `git campaign round -m "HYPOTHESIS"` (which you may also open straight away)',
            True,
        )
    return NextStep(
        name,
        STEP_ROUND,
        'git campaign round -m "HYPOTHESIS"',
        "the last round is decided and the next needs its hypothesis: `git campaign next --run -m IDEA`",
        False,
    )
