"""`git campaign mcp`: the campaign loop as Model Context Protocol tools, over stdio.

Each tool calls the same command function as the CLI verb of that name, so every rule holds as it
does there: validate re-runs every gate, nothing here writes a file of the work tree or the manifest
(edits reach a round only through the agent's own `git commit`, which the gates then judge), and
`accept` refuses, as the CLI's does, a round that failed a gate or was never measured
(`gitcampaign.gates`); it has no `--override-overfit`, which is a person's decision. The
instructions end with the rule book's rules (`gitcampaign.rules`), as validate applies them. Results
are JSON objects (structured content, and the same JSON as text for clients that read only text); a
user error is a tool error carrying the CLI's message and hint.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitcampaign import __version__, rules
from gitcampaign import git as g
from gitcampaign.campaign import Campaign, resolve
from gitcampaign.commands.override import pick_round
from gitcampaign.errors import CampaignError
from gitcampaign.vocabulary import Status

INSTALL_HINT = 'install the MCP extra: pip install "gitcampaign[mcp]"'
try:
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.types import CallToolResult, TextContent
except ImportError:
    raise CampaignError(
        "`git campaign mcp` needs the MCP Python SDK, which is not installed", INSTALL_HINT
    ) from None

HEARTBEAT_S = 5.0  # progress while a measurement runs, so clients neither time out nor look hung

INSTRUCTIONS = """Drives a git-native kernel-optimisation campaign: one hypothesis, one change, one
measurement, one mechanical decision per round. Loop: status -> open_round(hypothesis) -> edit the
kernel and `git commit` (message with Hypothesis: and Change: lines) -> validate -> read the decision
-> next round. Protected files (harness, reference, tests, manifest) must not change: validate rejects
such a round. diff_round shows what a round changed against the incumbent. analyze profiles the
incumbent (where the time goes, the share of the hardware limit, the bound): run it when status says
so (after two rollbacks in a row) and base the next hypothesis on it. Several agents at once: each in
its own git worktree, open_round(hypothesis, heat=True) opens its candidate in the heat; each commits
its own round; then one validate(heat=True) decides them all (the best confirmed afresh, the others
REJECT outrun). list_rejected(grep) says what was already tried and rejected: read it before a new
hypothesis. """ + rules.summary()


def _plain(value: Any) -> Any:
    """JSON values only: tuples as lists, NaN and infinities as null, anything else as its text."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def diff_round(repo_path: Path, campaign_name: str | None, number: int | None) -> dict[str, Any]:
    """The round's change against its incumbent (the accepted head it was measured, or will be, against)."""
    repo = g.open_repo(repo_path)
    campaign = Campaign(repo, resolve(repo, campaign_name))
    entry = pick_round(campaign, number)
    if entry.commit is None:
        raise CampaignError(
            f"round {entry.number} has no commit yet",
            "make the one change and `git commit` it on the round branch",
        )
    standing = entry.decision
    if entry.status in (Status.ACCEPTED, Status.REJECTED) and standing and standing.incumbent:
        incumbent = standing.incumbent
    else:
        incumbent = campaign.accepted_head()
    return {
        "round": entry.number,
        "status": entry.status,
        "hypothesis": entry.hypothesis,
        "commit": entry.commit,
        "incumbent": incumbent,
        "changed_paths": g.changed_paths(repo, incumbent, entry.commit),
        "diff_stat": g.diff_stat(repo, incumbent, entry.commit),
        "diff": g.diff_text(repo, incumbent, entry.commit),
    }


def build_server(repo_path: Path, campaign_name: str | None) -> MCPServer:
    """The MCP server for the repository at `repo_path` (tools open it afresh on every call)."""
    server = MCPServer("git-campaign", instructions=INSTRUCTIONS, version=__version__)

    def ok(data: dict[str, Any]) -> CallToolResult:
        structured = _plain(data)
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(structured, indent=2))],
            structured_content=structured,
        )

    def failed(error: CampaignError) -> CallToolResult:
        text = f"error: {error.message}" + (f"\nhint: {error.hint}" if error.hint else "")
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content={"error": error.message, "hint": error.hint},
            is_error=True,
        )

    def call(work: Callable[[], dict[str, Any]]) -> CallToolResult:
        try:
            return ok(work())
        except CampaignError as error:
            return failed(error)

    here, name = repo_path, campaign_name

    @server.tool()
    def status() -> CallToolResult:
        """Where the campaign stands: rounds by state, speedup, termination, and the next step."""
        from gitcampaign.commands.status import status as run

        return call(lambda: run(here, name).to_json())

    @server.tool()
    def recover() -> CallToolResult:
        """Finish what a killed command left (status lists it as `unfinished`): a branch move, its
        harnesses still running, its scratch worktrees. The tools that change the campaign do this first."""
        from gitcampaign.commands.recover import recover as run

        return call(lambda: run(here).to_json())

    @server.tool()
    def log() -> CallToolResult:
        """The lineage: every round with status, decision, speedup over baseline and key per-shape deltas."""
        from gitcampaign.commands.log import log as run

        return call(lambda: run(here, name).to_json())

    @server.tool()
    def show(number: int) -> CallToolResult:
        """One round (1 = baseline): hypothesis, diffstat, benchmark CSVs, verdict notes and profiles."""
        from gitcampaign.commands.show import show as run

        return call(lambda: run(here, name, number).to_json())

    @server.tool()
    def open_round(hypothesis: str = "", from_ref: str | None = None, heat: bool = False) -> CallToolResult:
        """Open the next round on the accepted head with its ONE hypothesis; then edit and `git commit`.
        With from_ref (a branch or commit holding one candidate commit), the round opens with that
        commit applied, its Hypothesis: line as the default hypothesis; then validate. With heat=True
        it opens in the heat, beside other agents' candidates on the same head (validate(heat=True)
        decides them together); `warnings` names rounds that already tried the same idea and failed,
        and the head's profiled bounds when the hypothesis names none; `profiled` false means the
        head it starts from has no profile (analyze it)."""
        from gitcampaign.commands.round import open_round as run

        def work() -> dict[str, Any]:
            result = run(here, name, hypothesis, from_ref, heat).to_json()
            validate = (
                "validate(heat=True), once every round of the heat is committed" if heat else "validate"
            )
            result["next"] = (
                validate
                if result["picked"]
                else f"make one change, `git commit` with Hypothesis:/Change: lines, then {validate}"
            )
            return result

        return call(work)

    @server.tool()
    async def validate(
        ctx: Context, full: bool = False, pairs: int | None = None, heat: bool = False, sweeps: int = 1
    ) -> CallToolResult:
        """Gates, the interleaved A/B measurement and the mechanical decision for the open round.
        Sends progress notifications while it measures; returns decision, reasons, ratio, CI, shapes.
        With heat=True: every candidate of the open heat, screened together against the incumbent
        (`sweeps` sweeps), the best confirmed by a fresh measurement; returns each round's decision.
        One validation of a heat runs at a time; a second call says the campaign is busy."""
        from gitcampaign.commands.validate import validate as run
        from gitcampaign.commands.validate import validate_heat

        outcome: list[Any] = []
        started = time.monotonic()

        def work() -> None:
            try:
                if heat:
                    outcome.append(validate_heat(here, name, full=full, pairs=pairs, sweeps=sweeps))
                else:
                    outcome.append(run(here, name, full=full, pairs=pairs))
            except CampaignError as error:
                outcome.append(error)

        async def measure() -> None:
            try:
                await anyio.to_thread.run_sync(work)
            finally:
                group.cancel_scope.cancel()

        await ctx.report_progress(0, None, "validate: gates, then the interleaved measurement")
        async with anyio.create_task_group() as group:
            group.start_soon(measure)
            while True:
                await anyio.sleep(HEARTBEAT_S)
                elapsed = time.monotonic() - started
                await ctx.report_progress(elapsed, None, f"validate: measuring ({elapsed:.0f} s)")
        result = outcome[0]
        if isinstance(result, CampaignError):
            return failed(result)
        what = "the heat" if heat else f"round {result.round}"
        await ctx.report_progress(time.monotonic() - started, None, f"validate: {what} {result.decision}")
        return ok(result.to_json())

    def override(verb: str, number: int | None, reason: str) -> dict[str, Any]:
        from gitcampaign.commands import override as commands

        return getattr(commands, verb)(here, name, number, reason).to_json()

    @server.tool()
    def accept(reason: str, number: int | None = None) -> CallToolResult:
        """Override a speed-rule REJECT of the last (or given) round; recorded as an override in the
        verdict. Refused for a round that failed a gate or was never validated."""
        return call(lambda: override("accept", number, reason))

    @server.tool()
    def rollback(reason: str, number: int | None = None) -> CallToolResult:
        """Reject the last (or given) round by hand; an accepted one is reverted by a new commit on main."""
        return call(lambda: override("rollback", number, reason))

    @server.tool()
    def lint(paths: list[str] | None = None) -> CallToolResult:
        """The static anti-cheat check on paths of the repository (default: all of it)."""
        from gitcampaign.commands.lint import run_lint

        def work() -> dict[str, Any]:
            top = g.root(g.open_repo(here)).resolve()
            targets = [(top / path).resolve() for path in paths or ["."]]
            outside = [str(path) for path in targets if not path.is_relative_to(top) or not path.exists()]
            if outside:
                raise CampaignError(
                    f"no such path in the repository: {', '.join(outside)}",
                    f"name existing paths inside {top}",
                )
            code, text = run_lint(targets, as_json=True)
            return {**json.loads(text), "exit_code": code}

        return call(work)

    @server.tool()
    def report(
        force: bool = False, record_failures: bool = False, next_hypotheses: list[str] | None = None
    ) -> CallToolResult:
        """REPORT: final full validation against the baseline and REPORT.md on the accepted line.
        Needs a termination condition (target, efficiency, max iterations); force=True is T4 (stop here).
        A failing acceptance suite or a final diff outside the accepted rounds stops it unless
        record_failures=True, which commits the report with them recorded. next_hypotheses: what the
        next rounds would try, listed in the report beside each profiled commit's verdicts."""
        from gitcampaign.commands.report import report as run

        return call(
            lambda: run(
                here,
                name,
                force=force,
                record_failures=record_failures,
                next_hypotheses=tuple(next_hypotheses or ()),
            ).to_json()
        )

    @server.tool()
    def analyze(
        number: int | None = None, shape: str | None = None, ncu: bool | None = None, isa: bool = False
    ) -> CallToolResult:
        """ANALYZE: profile the incumbent (or round `number`; 1 = baseline) at the representative shapes
        (or one `shape`): kernels with launches and GPU time, host vs GPU time per call, the share of the
        machine's limit and the bound (compute, memory, launch, host), a verdict per shape; with ncu
        (default: when installed and on a GPU) SM/DRAM throughput, occupancy, registers, shared memory,
        spills and stalls; with isa=True the compiled kernels' SASS. Recorded in the profile note, which
        `show` returns; it decides nothing. Profile after repeated rollbacks, before the next hypothesis."""
        from gitcampaign.commands.analyze import analyze as run

        return call(lambda: run(here, name, number, shape, ncu, isa).to_json())

    @server.tool()
    def list_rejected(grep: str = "") -> CallToolResult:
        """Every rejected round, as a direction not to try again as it was: hypothesis, reasons (not_faster,
        within_noise, shape_regression, outrun, a gate...), aggregate ratio and per-shape deltas in percent,
        the incumbent it was measured on. grep: only those holding every one of these words."""
        from gitcampaign.commands.log import rejected

        return call(lambda: rejected(here, name, grep).to_json())

    @server.tool(name="diff_round")
    def diff_round_tool(number: int | None = None) -> CallToolResult:
        """The round's diff (default: the latest round) against the incumbent it is judged against."""
        return call(lambda: diff_round(here, name, number))

    return server


def serve(repo_path: Path, campaign_name: str | None) -> None:
    """Run the server on stdin/stdout until the client closes the connection."""
    build_server(repo_path, campaign_name).run("stdio")
