"""`git campaign pull [REMOTE]`: bring another clone's rounds, pins and notes into this one.

Everything is checked before anything moves: a diverged accepted line or two different rounds under
one number stops the pull with nothing changed. Then notes (fast-forwarded or merged), pins, and
branches (fast-forward only), each a compare-and-swap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign import sync, verdict
from gitcampaign.campaign import Campaign, campaigns, check_name, resolve
from gitcampaign.commands.init import configure_notes
from gitcampaign.errors import CampaignError


@dataclass
class SyncResult:
    campaign: str
    source: str
    updated: list[str] = field(default_factory=list)  # "REF OLD..NEW" for every ref moved here or there
    merges: list[str] = field(default_factory=list)  # what a notes merge had to decide
    waiting: list[str] = field(default_factory=list)  # refs the other side is ahead on (push only)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def pull(
    repo_path: Path, campaign_name: str | None, remote: str | None = None, supersede: bool = False
) -> SyncResult:
    repo = g.open_repo(repo_path)
    source = sync.default_remote(repo, remote)
    name = _campaign_name(repo, campaign_name)
    with g.campaign_lock(repo, name):
        theirs = sync.fetch(repo, name, source, sync.tracking_label(source))
        if not any(ref.startswith("refs/heads/") for ref in theirs):
            raise CampaignError(
                f"{source} has no campaign {name}",
                f"push it from the clone that has it: git campaign push {source}",
            )
        return integrate(repo, name, theirs, source, supersede)


def _campaign_name(repo: Repo, name: str | None) -> str:
    """A campaign this clone may not have yet (pulling it is how it arrives) must be named."""
    if name and name not in campaigns(repo):
        return check_name(name)
    return resolve(repo, name)


def integrate(
    repo: Repo, name: str, theirs: dict[str, str], source: str, supersede: bool = False
) -> SyncResult:
    """Bring the refs `theirs` (already fetched) into this clone without losing anything of ours."""
    ours = sync.campaign_refs(repo, name)
    comparison = sync.compare(repo, ours, theirs)
    problems = list(comparison.conflicts)
    main_ref = f"refs/heads/{C.main_branch(name)}"
    superseded: list[str] = []
    for ref in comparison.refs_in(sync.DIVERGED):
        if ref == main_ref and supersede:
            superseded = _own_acceptances(repo, name, ours[ref], theirs[ref])
        elif ref == main_ref:
            problems.append(
                f"{C.main_branch(name)} diverged: {source} accepted "
                f"{g.count_commits(repo, ours[ref], theirs[ref])} commit(s) this clone does not have, and "
                f"this clone accepted {g.count_commits(repo, theirs[ref], ours[ref])} that {source} does not;"
                " the accepted line is linear and cannot be merged (`git campaign pull --supersede` keeps "
                f"{source}'s line and marks yours superseded, to re-run on top of it)"
            )
        elif ref.startswith("refs/heads/"):
            problems.append(
                f"{ref[len('refs/heads/') :]} is {ours[ref][:12]} here and {theirs[ref][:12]} on {source}: "
                "two people opened the same round number"
            )
    if problems:
        raise CampaignError(
            f"cannot bring campaign {name} from {source}; nothing was changed:\n  " + "\n  ".join(problems),
            "settle it with whoever pushed: keep one side (delete or rename yours with `git branch -m`, "
            f"re-run your round on top of {source}'s accepted head), then pull again",
        )
    result = SyncResult(name, source)
    if superseded:
        result.merges += _supersede(repo, name, superseded, ours[main_ref], theirs[main_ref], source)
        ours = sync.campaign_refs(repo, name)
        comparison = sync.compare(repo, ours, theirs)
    behind = comparison.refs_in(sync.BEHIND)
    for notes_ref in sync.NOTES_REFS:  # notes first: a ref never points at a commit without its notes
        state = comparison.states.get(notes_ref)
        if state == sync.BEHIND:
            _move(repo, notes_ref, theirs[notes_ref], ours.get(notes_ref), source, result)
        elif state == sync.DIVERGED:
            merged, decisions = sync.merge_notes(repo, notes_ref, ours[notes_ref], theirs[notes_ref], source)
            _move(repo, notes_ref, merged, ours[notes_ref], source, result)
            result.merges += decisions
    for ref in behind:
        if ref.startswith(f"refs/campaign/{name}/rejected/"):
            _move(repo, ref, theirs[ref], None, source, result)
    checked_out = g.head_ref_name(repo)
    if any(ref == checked_out for ref in behind):
        g.require_clean(repo, f"move the checked-out {checked_out} to {source}'s")
    for ref in behind:
        if ref.startswith("refs/heads/"):
            branch = ref[len("refs/heads/") :]
            g.move_branch(repo, branch, theirs[ref], ours.get(ref), f"campaign: pull from {source}")
            result.updated.append(f"{ref} {_short(ours.get(ref))}..{theirs[ref][:12]}")
    if name in campaigns(repo):
        configure_notes(g.root(repo))
    return result


def _own_acceptances(repo: Repo, name: str, ours: str, theirs: str) -> list[str]:
    """The accepted rounds on this clone's main since it forked from the other side's (oldest first);
    anything else there (a report, a rollback commit) cannot be superseded automatically."""
    fork = repo.git.merge_base(ours, theirs)
    commits = repo.git.rev_list("--first-parent", "--reverse", f"{fork}..{ours}").split()
    notes = Campaign(repo, name).verdicts()
    for commit in commits:
        standing = verdict.standing(notes.get(commit, []))
        if not standing or standing.get("decision") not in C.ACCEPTED:
            raise CampaignError(
                f"{commit[:12]} on this clone's {C.main_branch(name)} is not an accepted round; "
                "only accepted rounds can be superseded; nothing was changed",
                f"look at it with `git show {commit[:12]}`, and settle the two lines by hand",
            )
    return commits


def _supersede(repo: Repo, name: str, commits: list[str], ours: str, theirs: str, source: str) -> list[str]:
    """Keep `source`'s accepted line: each of this clone's own acceptances gets a verdict document
    (REJECT, superseded) and a rejected pin, and main goes back to where the lines forked; it was
    never published, so no one else's history changes. The pull then fast-forwards main."""
    campaign = Campaign(repo, name)
    if g.head_ref_name(repo) == campaign.main_ref:
        g.require_clean(repo, "move the checked-out accepted line")
    notes = campaign.verdicts()
    fork = g.parent(repo, commits[0])
    assert fork is not None
    lines = []
    for commit in commits:
        standing = verdict.standing(notes[commit]) or {}
        number = int(standing["round"])
        verdict.append(
            repo,
            commit,
            {
                "campaign": name,
                "round": number,
                "phase": verdict.PHASE_OVERRIDE,
                "hypothesis": standing.get("hypothesis", ""),
                "decision": C.DECISION_REJECT,
                "previous_decision": standing.get("decision"),
                "reasons": [C.REASON_SUPERSEDED],
                "notes": [
                    f"{source} accepted other rounds on the same head ({theirs[:12]}); re-run it on top"
                ],
                "commit": commit,
                "incumbent": theirs,
            },
        )
        if g.rev(repo, C.rejected_ref(name, number)) is None:
            g.update_ref(repo, C.rejected_ref(name, number), commit, None, "campaign: pin superseded round")
        round_branch = campaign.round_branch(number)
        started_from = g.parent(repo, commit)
        if started_from and g.rev(repo, f"refs/heads/{round_branch}") == commit:  # as a REJECT resets it
            g.move_branch(
                repo, round_branch, started_from, commit, f"campaign: reset superseded round {number}"
            )
        lines.append(
            f"round {number} ({commit[:12]}) superseded by {source}'s line; re-run it on top: "
            f'git campaign round -m "..." && git cherry-pick {commit[:12]}'
        )
    g.move_branch(repo, campaign.main_branch, fork, ours, f"campaign: superseded by {source}")
    return lines


def _move(repo: Repo, ref: str, new: str, old: str | None, source: str, result: SyncResult) -> None:
    g.update_ref(repo, ref, new, old, f"campaign: pull from {source}")
    result.updated.append(f"{ref} {_short(old)}..{new[:12]}")


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "(new)"
