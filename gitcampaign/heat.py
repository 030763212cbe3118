"""A heat: several candidate rounds on one accepted head, decided together by `validate --heat`
(docs/design.md, Heats).

Membership lives in git: `refs/campaign/NAME/heat/round-N` names the accepted head round N joined
the heat on, created and deleted by compare-and-swap. The open heat is the rounds that have such a
ref and are not decided yet; a ref left behind by a decided round, or by a round whose branch is
gone, says nothing and `tidy` drops it. What a heat decided stays in each round's verdict (`heat`).

A lock per candidate round is held by whatever may change or measure that round's commit: the
commit hooks on its branch and a validation measuring it. Agents committing to their own rounds
take different locks and never wait for each other; a commit to a round under validation, or a
validation of a round whose commit is being made, stops at once instead of measuring a commit that
is about to move.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from git import Repo

from gitcampaign import git as g
from gitcampaign.campaign import Campaign, Round
from gitcampaign.errors import CampaignError
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Status

UNDECIDED = (Status.OPEN, Status.EMPTY, Status.PENDING)


def members(campaign: Campaign, rounds: list[Round]) -> list[Round]:
    """The open heat: the undecided rounds that joined it, by number."""
    joined = campaign.heat_refs()
    return [entry for entry in rounds if entry.number in joined and entry.status in UNDECIDED]


def join(campaign: Campaign, number: int, base: str) -> None:
    """Round `number` joins the heat on `base` (a ref that must not exist yet)."""
    ref = str(CampaignRef.heat(campaign.name, number))
    g.update_ref(campaign.repo, ref, base, None, f"campaign: round {number} joins the heat")


def leave(campaign: Campaign, number: int) -> None:
    """Round `number` leaves the heat (decided, or abandoned); nothing to do when it is not in one."""
    ref = str(CampaignRef.heat(campaign.name, number))
    base = g.rev(campaign.repo, ref)
    if base is not None:
        g.delete_ref(campaign.repo, ref, base)


def tidy(campaign: Campaign, rounds: list[Round]) -> None:
    """Drop the heat refs of rounds that are decided or gone (a killed validation's leftovers, a
    rollback, a deleted branch), so that a later round of the same number starts outside the heat."""
    undecided = {entry.number for entry in rounds if entry.status in UNDECIDED}
    for number in campaign.heat_refs():
        if number not in undecided:
            leave(campaign, number)


def listing(numbers: list[int]) -> str:
    """`rounds 3, 4 and 5` (`round 3` alone)."""
    if len(numbers) == 1:
        return f"round {numbers[0]}"
    return f"rounds {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"


def lock_name(campaign: str, number: int) -> str:
    """The candidate lock's name beside the campaign's: '+' is in no campaign name."""
    return f"{campaign}+round-{number}"


@contextmanager
def candidate_locks(repo: Repo, campaign: str, numbers: list[int]) -> Iterator[None]:
    """Hold the lock of each round in `numbers` (non-blocking), or stop naming the busy one."""
    with ExitStack() as stack:
        for number in numbers:
            try:
                stack.enter_context(g.campaign_lock(repo, lock_name(campaign, number)))
            except CampaignError:
                raise CampaignError(
                    f"round {number} of campaign {campaign} is busy: a commit on its branch is running its"
                    " hooks, or a validate is measuring it",
                    "wait for it to finish, then run the command again",
                ) from None
        yield
