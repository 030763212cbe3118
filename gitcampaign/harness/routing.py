"""MoE routing: how many rows each expert gets. Owned by the harness so that no round can change
the work it is measured on (the `routing` field type of an op spec draws from here)."""

from __future__ import annotations

from typing import Any

from gitcampaign.harness.contract import DISTRIBUTIONS

# Spread of the router's logits for the capacity-factor distributions: softmax(0.5 * N(0, 1)) gives a
# busiest expert ~1.5-2.5x the mean load for 8-32 experts, like a router trained with a balance loss.
ROUTER_LOGIT_STD = 0.5


def round_to_total(shares: Any, total: int) -> Any:
    """Integer counts proportional to non-negative `shares` that sum exactly to `total`
    (largest-remainder rounding)."""
    import torch

    exact = shares / shares.sum() * total
    counts = exact.floor()
    short = total - int(counts.sum())
    counts[torch.argsort(exact - counts, descending=True)[:short]] += 1
    return counts.to(torch.int64)


def random_shares(count: int, generator: Any) -> Any:
    """Random positive weights for `count` experts (a lognormal spread, never a zero weight)."""
    import torch

    logits = torch.randn(count, generator=generator, dtype=torch.float64)
    return torch.softmax(logits * ROUTER_LOGIT_STD, dim=0)


def capacity_limited(shares: Any, total: int, capacity_factor: float) -> Any:
    """Rows per expert after a capacity-limited router drops overflow tokens.

    Routing R rows with routed shares p gives expert e min(p_e R, C) rows, capacity C =
    capacity_factor * R / G. The GEMM sees only kept rows and the caller fixes their number, so R is
    solved from Σ min(p_e R, C) = total: R = total / Σ min(p_e, cf / G). Busy experts therefore sit
    at capacity and the rest keep their routed share. top_k only changes how many tokens make the R
    rows, not this expected per-expert share, so it does not appear here.
    """
    import torch

    groups = shares.shape[0]
    kept = torch.minimum(shares, torch.full_like(shares, capacity_factor / groups))
    return round_to_total(kept, total)


def make_group_sizes(dist: str, total: int, groups: int, generator: Any = None, device: Any = "cpu") -> Any:
    """G int64 row counts summing exactly to `total`, for one of DISTRIBUTIONS.

    uniform      as equal as possible (the first total % G experts get one row more)
    top2_cf1.0   routed shares softmax(0.5 * N(0, 1)), capped at capacity factor 1.0 (`capacity_limited`)
    top1_cf1.25  the same with capacity factor 1.25
    hot_half     one random expert holds ceil(total / 2) rows, the others split the rest at random
    empty_one    one random expert holds 0 rows, the others split all rows at random
    Randomness comes from `generator` (a CPU generator), so each timed call gets a fresh routing.
    """
    import torch

    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}; use one of {', '.join(DISTRIBUTIONS)}")
    if groups < 1 or total < 0:
        raise ValueError(f"need groups >= 1 and total >= 0, got groups={groups}, total={total}")
    if dist == "empty_one" and groups < 2 and total > 0:
        raise ValueError("empty_one needs at least 2 groups: one stays empty, another takes the rows")
    if dist == "uniform":
        sizes = torch.full((groups,), total // groups, dtype=torch.int64)
        sizes[: total % groups] += 1
    elif dist in ("top2_cf1.0", "top1_cf1.25"):
        capacity_factor = 1.0 if dist == "top2_cf1.0" else 1.25
        sizes = capacity_limited(random_shares(groups, generator), total, capacity_factor)
    else:
        chosen = int(torch.randint(groups, (1,), generator=generator))
        others = [g for g in range(groups) if g != chosen]
        chosen_rows = (total + 1) // 2 if dist == "hot_half" else 0
        sizes = torch.zeros(groups, dtype=torch.int64)
        sizes[chosen] = chosen_rows
        if others:
            sizes[others] = round_to_total(random_shares(len(others), generator), total - chosen_rows)
        else:
            sizes[chosen] = total
    return sizes.to(device)


# The kernels run in this process and could rebind or rewrite the routing; what it was before they
# were imported is kept here and compared after every shape (`routing_replaced`).
_ROUTING_ORIGINALS = {
    function.__name__: (function, function.__code__)
    for function in (round_to_total, random_shares, capacity_limited, make_group_sizes)
}
_ROUTING_CONSTANTS = (DISTRIBUTIONS, ROUTER_LOGIT_STD)


def routing_replaced() -> list[str]:
    """The routing functions or constants that are no longer what this module defined."""
    current = globals()
    replaced = [
        name
        for name, (function, code) in _ROUTING_ORIGINALS.items()
        if current[name] is not function or function.__code__ is not code
    ]
    if (current["DISTRIBUTIONS"], current["ROUTER_LOGIT_STD"]) != _ROUTING_CONSTANTS:
        replaced.append("DISTRIBUTIONS/ROUTER_LOGIT_STD")
    return replaced
