"""Plots: the series read from the notes, the figure's marks, the command, and the missing-extra message."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from scratch_campaign import NAME, with_rounds  # noqa: E402

from gitcampaign import git as g  # noqa: E402
from gitcampaign import plot  # noqa: E402
from gitcampaign.campaign import Campaign  # noqa: E402
from gitcampaign.cli import main  # noqa: E402
from gitcampaign.errors import CampaignError  # noqa: E402


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plot") / "proj"
    root.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        from tests.conftest import HERMETIC_GIT_ENV

        for key, value in HERMETIC_GIT_ENV.items():
            patch.setenv(key, value)
        patch.chdir(root)
        return with_rounds(root)


def campaign(root: Path) -> Campaign:
    return Campaign(g.open_repo(root), NAME)


def test_series_marks_every_decided_round(project: Path) -> None:
    series = plot.series(campaign(project))
    assert [(p.round, p.status, p.measured) for p in series.points] == [
        (1, "baseline", True),
        (2, "accepted", True),
        (3, "rejected", True),
        (4, "rejected", False),  # the harness gate: no ratio, drawn on the incumbent's level
    ]
    speedups = [p.speedup for p in series.points]
    assert speedups == pytest.approx([1.0, 1.10, 0.95, 1.10], rel=1e-4)
    assert series.levels == [
        (1, 1.0),
        (2, pytest.approx(1.10, rel=1e-4)),
        (3, pytest.approx(1.10, rel=1e-4)),
        (4, pytest.approx(1.10, rel=1e-4)),
    ]
    ratios, _ = plot.final_shape_ratios(campaign(project))
    assert set(ratios) == {"s-small", "s-mid", "s-odd", "s-large"}
    assert all(value == pytest.approx(1.10, rel=1e-4) for value in ratios.values())


def test_svg_has_axes_marks_and_noise_band(project: Path) -> None:
    data = plot.plot_data(campaign(project))
    data.series.noise = 0.02
    svg = plot.render(data, "svg").decode()
    for text in (
        "speedup over baseline (x)",
        "round (1 = baseline)",
        "accepted",
        "rejected by a gate (no speed ratio)",
        "noise floor (A/A, ±2.00%)",
        "final / baseline (x)",
        "s-large",
        "1.100x",
    ):
        assert text in svg, text
    assert "fill: #99aabb" in svg  # the shaded band
    assert plot.render(data, "svg").decode() == svg  # no date or random ids: it diffs cleanly in git


def test_plot_command_png_and_shape(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.png"
    assert main(["-C", str(project), "plot", "-o", str(out)]) == 0
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 600 and height > 600
    shape_svg = tmp_path / "large.svg"
    assert main(["-C", str(project), "plot", "--shape", "s-large", "-o", str(shape_svg)]) == 0
    assert "shape s-large" in shape_svg.read_text()
    with pytest.raises(CampaignError, match="no shape 'nope'"):
        plot.series(campaign(project), "nope")
    assert main(["-C", str(project), "plot", "-o", str(tmp_path / "x.jpg")]) == 1


def test_missing_matplotlib_names_the_extra(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import now raises ImportError
    assert not plot.available()
    assert main(["-C", str(project), "plot"]) == 1
    assert 'pip install "gitcampaign[plot]"' in capsys.readouterr().err
