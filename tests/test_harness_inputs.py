"""The judge owns its inputs (issue 8, docs/harness.md): what a round may edit cannot change the
work the quick harness measures.

- The MoE routing lives in the harness, not in `kernels/`: a round that rewrites the routing in
  `kernels/grouped_gemm.py` leaves the measured distribution as it was, and a kernel module that
  patches the harness's routing from inside the process fails every shape.
- Every timed call gets fresh inputs: a kernel that caches its result keyed on `id()` or `data_ptr()`
  of its inputs either never answers from the cache (it gains nothing) or answers wrongly and fails;
  the inputs are views into banks of random values (no draw between timed calls), at addresses and
  with contents no earlier call had, and a cache keyed on the bank's storage fails.
- The op modules import nothing from `gitcampaign`.

All run the frozen harness on the CPU, as a subprocess in a scratch repository (see test_quick_harness).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.harness_build import frozen_module
from tests.test_quick_harness import REPO_ROOT, harness_repo, rows, run_harness

qtb = frozen_module()

# A round's grouped GEMM that also "rewrites the routing": its own uniform make_group_sizes and
# DISTRIBUTIONS (what the harness used to import from this file), optionally a patch of the
# harness's own routing from inside the process. It logs the group sizes it is called with.
ROUTING_ROUND = """
import os
import sys

import torch

DISTRIBUTIONS = ("uniform",) * 5


def make_group_sizes(dist, total, groups, generator=None, device="cpu"):
    import torch  # a local import, so that the code also runs as the harness's function's code

    sizes = torch.full((groups,), total // groups, dtype=torch.int64)
    sizes[: total % groups] += 1
    return sizes.to(device)


_harness = sys.modules["__main__"]
if os.environ.get("FAKE_ROUTING") == "rebind":
    _harness.make_group_sizes = make_group_sizes
elif os.environ.get("FAKE_ROUTING") == "rewrite":
    _harness.make_group_sizes.__code__ = make_group_sizes.__code__
elif os.environ.get("FAKE_ROUTING") == "constants":
    _harness.ROUTER_LOGIT_STD = 0.0  # every capacity-factor routing becomes uniform


def grouped_gemm(a, b, group_sizes):
    with open(os.environ["FAKE_ROUTING_LOG"], "a") as log:
        log.write(",".join(str(size) for size in group_sizes.tolist()) + "\\n")
    chunks = a.split(group_sizes.tolist())
    return torch.cat([chunk @ b[g].T for g, chunk in enumerate(chunks)])
"""

# Forbidden caches (docs/harness.md: an identity-keyed cache must FAIL). A miss costs SLOW_MS (the
# "real" kernel), a hit is free: if the cache ever answered during timing, the median would show it.
SLOW_MS = 20.0
IDENTITY_CACHE = f"""
import time

import torch

_cache = {{}}


def _key(a, b):
    kind = "{{kind}}"
    if kind == "id":
        return (id(a), id(b), tuple(a.shape), tuple(b.shape))
    return (a.data_ptr(), b.data_ptr(), a._version, b._version, tuple(a.shape), tuple(b.shape))


def gemm(a, b):
    key = _key(a, b)
    if key not in _cache:
        time.sleep({SLOW_MS / 1e3})
        _cache[key] = (a @ b.T).detach()
    return _cache[key] + 0 * (a[:, :1] @ b[:, :1].T)
"""


# A cache keyed on the storage under the inputs (what views into one bank share): it answers from
# the first call of each storage, so it hits on every later call and its answers are wrong.
STORAGE_CACHE = """
_cache = {}


def gemm(a, b):
    key = (a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr())
    if key not in _cache:
        _cache[key] = (a @ b.T).detach()
    return _cache[key].clone()
"""


def _logged_sizes(log: Path) -> list[list[int]]:
    return [[int(size) for size in line.split(",")] for line in log.read_text().splitlines()]


def test_a_round_rewriting_the_routing_in_the_kernel_file_changes_nothing(tmp_path: Path) -> None:
    """hot_half keeps one expert at half the rows and empty_one one expert at zero, whatever the
    kernel file says, drawn afresh for each call."""
    harness = harness_repo(tmp_path / "repo", "grouped_gemm", "triton", {"grouped_gemm.py": ROUTING_ROUND})
    shapes: list[dict[str, object]] = [
        {"label": "hot", "M": 64, "N": 8, "K": 8, "B": 4, "dist": "hot_half"},
        {"label": "empty", "M": 60, "N": 8, "K": 8, "B": 4, "dist": "empty_one"},
    ]
    log = tmp_path / "sizes.log"
    process, csv_text = run_harness(
        harness, shapes, "--repeats", "2", "--forward-only", env={"FAKE_ROUTING_LOG": str(log)}
    )
    assert process.returncode == 0, process.stderr
    assert csv_text is not None and [row["Check"] for row in rows(csv_text)] == ["PASS", "PASS"]
    calls = _logged_sizes(log)
    hot = [sizes for sizes in calls if sum(sizes) == 64]
    empty = [sizes for sizes in calls if sum(sizes) == 60]
    assert len(hot) >= 3 and len(empty) >= 3  # warm-up, timed calls, checked calls
    assert all(max(sizes) == 32 for sizes in hot), hot
    assert all(min(sizes) == 0 and max(sizes) < 60 for sizes in empty), empty
    # A fresh routing per call (the harness's generator), not one fixed split.
    assert len({tuple(sizes) for sizes in hot}) > 1 and len({tuple(sizes) for sizes in empty}) > 1


@pytest.mark.parametrize(
    ("patch", "named"),
    [
        ("rebind", "make_group_sizes"),
        ("rewrite", "make_group_sizes"),
        ("constants", "DISTRIBUTIONS/ROUTER_LOGIT_STD"),
    ],
)
def test_a_kernel_that_patches_the_harness_routing_fails(tmp_path: Path, patch: str, named: str) -> None:
    harness = harness_repo(tmp_path / "repo", "grouped_gemm", "triton", {"grouped_gemm.py": ROUTING_ROUND})
    shapes = [{"label": "hot", "M": 64, "N": 8, "K": 8, "B": 4, "dist": "hot_half"}]
    env = {"FAKE_ROUTING_LOG": str(tmp_path / "sizes.log"), "FAKE_ROUTING": patch}
    process, csv_text = run_harness(harness, shapes, "--repeats", "1", "--forward-only", env=env)
    assert process.returncode == 1, process.stderr
    assert csv_text is not None and rows(csv_text)[0]["Check"] == "FAIL"
    assert f"hot: FAIL: MoE routing replaced by the kernels: {named}" in process.stderr


def test_routing_check_sees_nothing_on_an_untouched_harness() -> None:
    assert qtb.routing_replaced() == []


@pytest.mark.parametrize("kind", ["id", "data_ptr"])
def test_an_identity_keyed_cache_gains_nothing_or_fails(tmp_path: Path, kind: str) -> None:
    """Fresh inputs every timed call: the cache never answers while the clock runs (each call pays
    the miss), or, when the allocator reused an address or an id and the cache answered, the check
    that changes an input's values behind an unchanged identity catches it."""
    harness = harness_repo(
        tmp_path / "repo", "gemm", "triton", {"gemm.py": IDENTITY_CACHE.replace("{kind}", kind)}
    )
    # Small (allocator bins, addresses reused at once) and larger operands.
    shapes = [{"label": "small", "M": 32, "N": 32, "K": 32}, {"label": "large", "M": 256, "N": 256, "K": 256}]
    process, csv_text = run_harness(harness, shapes, "--repeats", "5", "--forward-only")
    assert csv_text is not None, process.stderr
    for row in rows(csv_text):
        if row["Check"] == "PASS":
            assert float(row["Forward Time (ms)"]) >= 0.9 * SLOW_MS, (row, process.stderr)
        else:
            assert row["Check"] == "FAIL", (row, process.stderr)
            assert (
                f"{row['label']}: FAIL: forward: new values in the same input tensors got the old result"
                in (process.stderr)
            )


def test_the_op_modules_import_nothing_from_gitcampaign(tmp_path: Path) -> None:
    """What a round edits must not reach into the tool that judges it (nor need it installed)."""
    for path in sorted((REPO_ROOT / "kernels").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(name.split(".")[0] == "gitcampaign" for name in names), path
    # And at run time, with gitcampaign made unimportable.
    probe = (
        "import sys; sys.modules['gitcampaign'] = None\n"
        "import kernels.gemm, kernels.gemm_fp8, kernels.grouped_gemm, kernels.quant"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def _takes(bank: qtb.Bank, count: int, size: tuple[int, ...]) -> list[torch.Tensor]:
    return [bank.take(size, torch.float16) for _ in range(count)]


def test_bank_views_never_share_an_address_and_rest_between_uses() -> None:
    """Views of 1 KB with an L2 of 16 KB: a bank holds ceil(4 x 16 / 1) + 1 = 65 views and two
    512-byte offsets (a 1 KB stride has two), so the first pass takes 66 views, the second, 512 bytes
    further along, 65, and then the values are drawn anew: 131 takes a buffer. Over 400 takes: every
    view at an address of its own, aligned as the caching allocator aligns, with contents of its
    own, and any two views that share a byte are at least 64 takes apart."""
    bank = qtb.Bank(torch.Generator().manual_seed(1), "cpu", l2_bytes=16 * 1024)
    views = _takes(bank, 400, (8, 64))
    assert len({view.data_ptr() for view in views}) == 400
    bases = {view.untyped_storage().data_ptr() for view in views}
    assert len(bases) == -(-400 // 131)  # drawn anew after every second pass
    assert all(
        (view.data_ptr() - view.untyped_storage().data_ptr()) % qtb.BANK_ALIGN_BYTES == 0 for view in views
    )
    assert len({view.numpy().tobytes() for view in views}) == 400
    for first, view in enumerate(views):
        for later in range(first + 1, len(views)):
            other = views[later]
            shared = (
                other.untyped_storage().data_ptr() == view.untyped_storage().data_ptr()
                and abs(other.data_ptr() - view.data_ptr()) < view.numel() * view.element_size()
            )
            assert not shared or later - first >= 64, (first, later)
    assert bank.handed_out == 400 * 8 * 64 * 2


def test_bank_keeps_a_view_taken_before_it_was_drawn_anew() -> None:
    """A view taken before a redraw keeps its values: a timed backward's saved forward inputs stay
    as they were (a redraw in place would bump their version and break the backward)."""
    bank = qtb.Bank(torch.Generator().manual_seed(2), "cpu")
    first = bank.take((4, 256), torch.float16)
    kept = first.clone()
    _takes(bank, 20, (4, 256))  # 2 KB: four offsets in its stride, 9 takes between redraws
    later = bank.take((4, 256), torch.float16)
    assert later.untyped_storage().data_ptr() != first.untyped_storage().data_ptr()
    assert torch.equal(first, kept) and first._version == 0


def test_banks_are_per_size_dtype_and_distribution() -> None:
    """The quantiser's inputs keep their per-row binades; a GEMM's a, b and grad_out of one size walk
    one bank together (disjoint views)."""
    bank = qtb.Bank(torch.Generator().manual_seed(3), "cpu")
    x = bank.take((64, 128), torch.float32, qtb.binades)
    spread = x.abs().amax(dim=1)
    assert float(spread.max() / spread.min()) > 64  # rows 2^-6 .. 2^6 apart
    a, g = bank.take((64, 128), torch.float32), bank.take((64, 128), torch.float32)
    assert len(bank.banks) == 2 and a.untyped_storage().data_ptr() == g.untyped_storage().data_ptr()
    assert abs(a.data_ptr() - g.data_ptr()) >= a.numel() * a.element_size()


def test_a_cache_keyed_on_the_bank_storage_fails(tmp_path: Path) -> None:
    harness = harness_repo(tmp_path / "repo", "gemm", "triton", {"gemm.py": STORAGE_CACHE})
    process, csv_text = run_harness(
        harness, [{"label": "stored", "M": 64, "N": 64, "K": 64}], "--repeats", "2", "--forward-only"
    )
    assert process.returncode == 1, process.stderr
    assert csv_text is not None and rows(csv_text)[0]["Check"] == "FAIL", process.stderr
