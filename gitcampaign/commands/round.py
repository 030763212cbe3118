"""OPTIMIZE: `git campaign round -m HYPOTHESIS` opens `campaign/NAME/round-N` on the accepted head;
`--from REF` opens it with the one commit REF already on it (a candidate prepared on another branch);
`--heat` opens it in the heat, beside the other candidates on the same head (`validate --heat`)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from git import Repo

from gitcampaign import git as g
from gitcampaign import heat as heats
from gitcampaign import profile, rejections
from gitcampaign.campaign import Campaign, Round, locked
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import Manifest
from gitcampaign.protected import NEW_ON_IMPORT_PATH, protected_changes
from gitcampaign.vocabulary import (
    MESSAGE_FORMAT,
    NOT_UTF8_HINT,
    Status,
    hypothesis_of,
    missing_message_lines,
    not_utf8,
)

# A hypothesis is a sentence or two; it is kept in git config, verdict notes and reports. Past this it
# is a document (an agent's whole context), and the reasoning belongs in the commit message.
MAX_HYPOTHESIS = 4000
# Bidirectional overrides and isolates make a table or a terminal show text other than what it holds.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def check_hypothesis(hypothesis: str) -> None:
    """Text a round can carry everywhere it goes (git config, YAML notes, tables, terminals): within
    MAX_HYPOTHESIS characters, and no control character but a tab or a newline."""
    hint = 'say it in a sentence or two of plain text: git campaign round -m "what you expect, and why"'
    if len(hypothesis) > MAX_HYPOTHESIS:
        raise CampaignError(
            f"the hypothesis is {len(hypothesis)} characters, longer than {MAX_HYPOTHESIS}; no round was opened",
            hint + " (the details go in the commit message)",
        )
    undecodable = not_utf8(hypothesis)  # Python keeps a byte that is not UTF-8 as a lone surrogate
    if undecodable:
        raise CampaignError(
            f"the hypothesis is not UTF-8 ({undecodable}); no round was opened",
            f"{NOT_UTF8_HINT}; then {hint}",
        )
    for character in hypothesis:
        kind = unicodedata.category(character)
        if (kind == "Cc" and character not in "\t\n") or character in BIDI_CONTROLS:
            raise CampaignError(
                f"the hypothesis holds a control character ({character!r}); no round was opened", hint
            )


@dataclass
class RoundResult:
    number: int
    branch: str
    base: str
    picked: str | None = None  # the round's commit, when it came from --from
    heat: list[int] = field(default_factory=list)  # the open heat's rounds, this one included (--heat)
    warnings: list[str] = field(default_factory=list)  # the same idea, already rejected on this head
    profiled: bool = False  # whether `analyze` profiled the accepted head the round starts from

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def open_round(
    repo_path: Path,
    campaign_name: str | None,
    hypothesis: str,
    from_ref: str | None = None,
    heat: bool = False,
) -> RoundResult:
    with locked(repo_path, campaign_name) as campaign:
        repo = campaign.repo
        source = _candidate(repo, from_ref) if from_ref else None
        if source is not None and not hypothesis.strip():
            hypothesis = source[1]
        if not hypothesis.strip():
            raise CampaignError(
                "a round needs its hypothesis", 'git campaign round -m "what you expect, and why"'
            )
        check_hypothesis(hypothesis)
        g.require_clean(repo, "open a round")
        manifest = campaign.require_baseline()
        _, rounds = campaign.lineage()
        heats.tidy(campaign, rounds)
        joining = _unfinished(campaign, rounds, heat)
        number = campaign.next_round_number()
        branch = campaign.round_branch(number)
        base = campaign.accepted_head()
        tip = base
        if source is not None:
            if g.is_ancestor(repo, source[0], base):
                raise CampaignError(
                    f"{from_ref} ({source[0][:12]}) is already in the accepted line", "pick a newer commit"
                )
            # Applied before any ref moves: a change that does not apply leaves nothing behind.
            picked = g.pick_onto(repo, source[0], base)
            if picked is None:
                raise CampaignError(
                    f"{from_ref} ({source[0][:12]}) does not apply to the accepted head {base[:12]}",
                    f"rebase it onto {campaign.main_branch} (`git rebase {campaign.main_branch}` on its "
                    "branch), then run this again",
                )
            _refuse_judged_changes(repo, manifest, str(from_ref), source[0], base, picked)
            tip = picked
        # Heat refs before the branch: a kill in between leaves a ref without a round, which `tidy`
        # drops, never a round of the heat outside it.
        for entry in joining:
            heats.join(campaign, entry.number, base)
        if heat:
            heats.join(campaign, number, base)
        g.update_ref(repo, campaign.round_ref(number), tip, None, f"campaign: open round {number}")
        g.config_set(repo, f"branch.{branch}.description", hypothesis.strip())
        g.checkout(repo, branch)
        in_heat = sorted(campaign.heat_refs()) if heat else []
        warnings = [
            f"round {entry.round} tried this on the same accepted head and was rejected"
            f" ({', '.join(entry.reasons) or 'no reason recorded'}"
            + (f"; {entry.deltas_text()}" if entry.deltas else "")
            + f"): {entry.hypothesis}"
            for entry in rejections.repeats(rejections.rejected_rounds(rounds), hypothesis, base)
        ]
        documents = profile.read(repo, base)
        warnings += _unnamed_bound(hypothesis, base, documents[-1] if documents else {})
        return RoundResult(
            number, branch, base, None if source is None else tip, in_heat, warnings, bool(documents)
        )


def _unnamed_bound(hypothesis: str, base: str, document: dict[str, Any]) -> list[str]:
    """A warning when the base's profile shows bounds and the hypothesis names none of them: a round
    should say which bound it moves, and how (`git campaign show` has the profile's verdicts)."""
    found = profile.bounds(document)
    words = re.findall(r"[a-z]+", hypothesis.lower())
    if not found or any(word.startswith(bound) for word in words for bound in found):  # "launches"
        return []
    shown = "; ".join(f"{bound}: {', '.join(labels)}" for bound, labels in found.items())
    return [
        f"the hypothesis names none of the bounds of {base[:12]}'s profile ({shown}):"
        " say which one the change moves, and how"
    ]


def _unfinished(campaign: Campaign, rounds: list[Round], heat: bool) -> list[Round]:
    """The unfinished rounds of this clone that a new round joins in the heat (`heat`); CampaignError
    when one stands in the way: a pending decision (validate applies it first), a plain round opened
    while a heat is open, or a second plain round (one hypothesis at a time, or a heat)."""
    in_heat = [entry.number for entry in heats.members(campaign, rounds)]
    if in_heat and not heat:
        raise CampaignError(
            f"a heat is open on this accepted head ({heats.listing(in_heat)}): a plain round would be measured"
            " against a head the heat is about to move",
            'join it: `git campaign round --heat -m "HYPOTHESIS"`; or close it: commit each of its rounds,'
            " then `git campaign validate --heat`",
        )
    # One hypothesis at a time per person: a round pulled from a teammate (no description here,
    # `open_round` writes one) does not block this clone from opening the next number.
    unfinished = [
        r
        for r in rounds
        if r.status in (Status.OPEN, Status.EMPTY, Status.PENDING)
        and r.number not in in_heat
        and g.config_get(campaign.repo, f"branch.{campaign.round_branch(r.number)}.description") is not None
    ]
    pending = [r for r in unfinished if r.status == Status.PENDING]
    if pending or (unfinished and not heat):
        current = (pending or unfinished)[-1]
        raise CampaignError(
            f"round {current.number} is still {current.status}: one hypothesis at a time (or several at once"
            ' in a heat: `git campaign round --heat -m "HYPOTHESIS"` makes it a heat of both)',
            "finish it with `git campaign validate` (or `git campaign rollback`) first",
        )
    return unfinished


def _refuse_judged_changes(
    repo: Repo, manifest: Manifest, ref: str, commit: str, base: str, picked: str
) -> None:
    """A candidate that also edits what judges it (a test, the harness, the campaign folder) would be
    rejected by validate as harness_changed: refuse it now, before the round takes a number."""
    changed = g.changed_paths(repo, base, picked)
    judged = protected_changes(repo, manifest, base, picked, changed)
    if not judged:
        return
    judged_paths = {entry.removesuffix(NEW_ON_IMPORT_PATH) for entry in judged}
    rest = [path for path in changed if path not in judged_paths]
    keep = (
        f"git switch -c {ref}-kernel {commit[:12]}~ && git checkout {commit[:12]} -- {' '.join(rest)} && "
        f"git commit -C {commit[:12]}, then `git campaign round --from {ref}-kernel`"
        if rest
        else "put the kernel's change in a commit of its own"
    )
    raise CampaignError(
        f"--from {ref} ({commit[:12]}) changes what judges the round: {', '.join(judged)}; validate "
        "would reject it as harness_changed (the tests, the harness and the campaign folder stay as "
        "the baseline had them); no round was opened",
        f"commit the rest alone and land the new tests after the campaign: {keep}",
    )


def _candidate(repo: Repo, ref: str) -> tuple[str, str]:
    """(commit, hypothesis) of `--from REF`: one non-merge commit whose message has the round's lines."""
    commit = g.rev(repo, ref)
    if commit is None:
        raise CampaignError(f"--from {ref} is not a commit", "name a branch, tag or commit id")
    if len(g.trees_and_parents(repo, [commit])[commit][1]) != 1:
        raise CampaignError(
            f"--from {ref} ({commit[:12]}) is not a single-parent commit: a round is one change",
            "squash the candidate into one commit on its branch",
        )
    message = g.commit_message(repo, commit)
    missing = missing_message_lines(message.splitlines())
    if missing:
        raise CampaignError(
            f"--from {ref} ({commit[:12]}) has no {' and '.join(missing)} line in its message",
            f"reword it (`git commit --amend` on its branch) to carry\n{MESSAGE_FORMAT}",
        )
    return commit, hypothesis_of(message)
