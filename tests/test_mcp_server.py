"""`git campaign mcp` end to end: the SDK's own client starts the server over stdio on a scratch repo,
opens a round, the change is committed through git, validate runs with progress, the decision is read."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_project import git, set_kernel  # noqa: E402
from scratch_campaign import NAME, with_baseline  # noqa: E402

from gitcampaign import constants as C  # noqa: E402
from gitcampaign.refs import CampaignRef
from gitcampaign.vocabulary import Decision

REPO_ROOT = Path(__file__).resolve().parents[1]
TOOLS = {
    "status",
    "recover",
    "log",
    "show",
    "open_round",
    "validate",
    "accept",
    "rollback",
    "lint",
    "report",
    "diff_round",
    "analyze",
    "list_rejected",
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    monkeypatch.chdir(tmp_path)
    root.mkdir()
    monkeypatch.chdir(root)
    return with_baseline(root)


def server(root: Path) -> StdioServerParameters:
    # The test's hermetic git environment (HOME, identity, no user config) goes to the server too.
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "gitcampaign", "-C", str(root), "mcp"], env=env, cwd=str(root)
    )


def data(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return dict(result.structured_content)


def test_agent_loop_over_stdio(project: Path) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async def session() -> None:
        async with Client(server(project), read_timeout_seconds=120) as client:
            listed = await client.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS
            report_tool = next(tool for tool in listed.tools if tool.name == "report")
            assert {"force", "record_failures"} <= set(report_tool.input_schema["properties"])

            opened = data(await client.call_tool("open_round", {"hypothesis": "bigger tiles"}))
            assert opened["number"] == 2 and opened["branch"] == CampaignRef.round_branch(NAME, 2).branch

            # The agent edits and commits with git itself; no tool writes a file.
            set_kernel(project, 110)
            git(project, "commit", "-q", "-am", "Hypothesis: bigger tiles\nChange: speed 110")
            round_commit = git(project, "rev-parse", "HEAD").strip()

            diff = data(await client.call_tool("diff_round", {}))
            assert diff["changed_paths"] == ["kernel.py"] and "+SPEED = 110" in diff["diff"]

            decided = await client.call_tool("validate", {}, progress_callback=on_progress)
            assert not decided.is_error, decided.content
            verdict = data(decided)
            assert verdict["decision"] == Decision.ACCEPT and verdict["round"] == 2
            assert verdict["ratio"] == pytest.approx(1.10, rel=1e-4)

            state = data(await client.call_tool("status", {}))
            assert state["accepted_head"] == round_commit and state["rounds"]["accepted"] == 1
            lineage = data(await client.call_tool("log", {}))
            assert [row["status"] for row in lineage["rounds"]] == ["baseline", "accepted"]

            # A user error is a tool error that carries the CLI's hint.
            again = await client.call_tool("validate", {})
            assert again.is_error
            assert "git campaign round" in data(again)["hint"]
            assert "hint:" in again.content[0].text

            # A round that edits the harness is rejected by the gate, and no override accepts it.
            await client.call_tool("open_round", {"hypothesis": "a friendlier harness"})
            bench = project / "bench.py"
            bench.write_text(bench.read_text().replace("speed = ", "speed = 2 * "))
            git(project, "commit", "-q", "-am", "Hypothesis: harness\nChange: harness")
            gated = data(await client.call_tool("validate", {}))
            assert (gated["decision"], gated["reasons"]) == (Decision.REJECT, [C.REASON_HARNESS_CHANGED])
            refused = await client.call_tool("accept", {"reason": "looks fine to me"})
            assert refused.is_error and C.REASON_HARNESS_CHANGED in data(refused)["error"]
            assert git(project, "rev-parse", CampaignRef.main(NAME).branch).strip() == round_commit

            # A candidate committed on a branch of its own (another agent's) opens the next round as is.
            git(project, "checkout", "-q", "-b", "candidate", round_commit)
            set_kernel(project, 120)
            git(project, "commit", "-q", "-am", "Hypothesis: even bigger tiles\nChange: speed 120")
            git(project, "checkout", "-q", CampaignRef.main(NAME).branch)
            picked = data(await client.call_tool("open_round", {"from_ref": "candidate"}))
            assert picked["number"] == 4 and picked["picked"] and picked["next"] == "validate"
            assert git(project, "rev-parse", f"{picked['picked']}^").strip() == round_commit

    anyio.run(session)
    assert progress and progress[0][0] == 0
    assert any(message and "ACCEPT" in message for _, message in progress)


def test_initialize_handshake_of_current_agent_tools(project: Path) -> None:
    """Agent tools of today open with the `initialize` handshake, not the SDK 2 discovery probe."""

    async def session() -> None:
        async with Client(server(project), mode="legacy", read_timeout_seconds=60) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            state = data(await client.call_tool("status", {}))
            assert state["campaign"] == NAME and state["next"].startswith("git campaign round")
            assert state["unfinished"] == [] and data(await client.call_tool("recover", {})) == {"done": []}

    anyio.run(session)


def test_bad_arguments_are_tool_errors_that_change_nothing(project: Path) -> None:
    """A huge or control-laden hypothesis opens no round (no empty branch left behind); `pairs`
    outside the manifest's bound is refused before anything is measured; neither crashes the tool."""

    def branches() -> str:
        return git(project, "for-each-ref", "--format=%(refname)", "refs/heads/campaign")

    async def session() -> None:
        async with Client(server(project), read_timeout_seconds=120) as client:
            before = branches()
            for hypothesis in ("x" * 200_000, "tiles\x00", "tiles\x1b[2J"):
                refused = await client.call_tool("open_round", {"hypothesis": hypothesis})
                assert refused.is_error and "no round was opened" in data(refused)["error"], refused
                assert data(refused)["hint"] and branches() == before
            assert not (await client.call_tool("open_round", {"hypothesis": "bigger tiles"})).is_error
            set_kernel(project, 110)
            git(project, "commit", "-q", "-am", "Hypothesis: bigger tiles\nChange: speed 110")
            for pairs in (-5, 0, 10**9):
                refused = await client.call_tool("validate", {"pairs": pairs})
                assert refused.is_error and "is outside [1, 50]" in data(refused)["error"], refused
            assert "round-2" in branches()
            assert git(project, "notes", "--ref", C.NOTES_BENCH, "list").count("\n") == 1  # the baseline's

    anyio.run(session)


def test_agents_open_a_heat_validate_it_and_read_what_was_rejected(project: Path) -> None:
    """open_round(heat=True) twice, each candidate committed through git, validate(heat=True): the
    faster is accepted, the other is outrun, and list_rejected says so (what not to try again)."""

    async def session() -> None:
        async with Client(server(project), read_timeout_seconds=120) as client:
            for number, speed in ((2, 110), (3, 120)):
                opened = data(
                    await client.call_tool("open_round", {"hypothesis": f"speed {speed}", "heat": True})
                )
                assert opened["number"] == number and opened["heat"] == list(range(2, number + 1))
                assert "validate(heat=True)" in opened["next"]
                set_kernel(project, speed)
                git(project, "commit", "-q", "-am", f"Hypothesis: speed {speed}\nChange: speed {speed}")
            single = await client.call_tool("validate", {})
            assert single.is_error and "validate --heat" in data(single)["hint"]
            decided = data(await client.call_tool("validate", {"heat": True}))
            assert decided["accepted"] == 3 and decided["confirmed"] == 3
            assert [(r["round"], r["decision"]) for r in decided["rounds"]] == [(2, "REJECT"), (3, "ACCEPT")]
            listed = data(await client.call_tool("list_rejected", {"grep": "110"}))
            assert [(r["round"], r["reasons"]) for r in listed["rounds"]] == [(2, [C.REASON_OUTRUN])]
            assert listed["rounds"][0]["deltas"]["s-large"] == pytest.approx(10.0)

    anyio.run(session)
