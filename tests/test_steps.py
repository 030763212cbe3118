"""gitcampaign/steps.py in isolation: the import check, the build cache key, old manifests."""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest
import yaml

from gitcampaign import git as g
from gitcampaign import steps
from gitcampaign.commands import init as init_module
from gitcampaign.commands.init import InitOptions, init
from gitcampaign.errors import CampaignError
from gitcampaign.manifest import parse_manifest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_project import git, make_project  # noqa: E402

SUFFIX = EXTENSION_SUFFIXES[0]  # e.g. .cpython-311-x86_64-linux-gnu.so

# An editable install's import hook that goes ahead of sys.path (as meson-python's does): `pkg`
# then comes from elsewhere, whatever PYTHONPATH says.
SHADOWING_SITECUSTOMIZE = """
import importlib.machinery, sys
class _Editable:
    @staticmethod
    def find_spec(name, path=None, target=None):
        return importlib.machinery.PathFinder.find_spec(name, [{elsewhere!r}]) if name == "pkg" else None
sys.meta_path.insert(0, _Editable)
"""


def fake_build(root: Path) -> str:
    """A package with an 'extension module' (never loaded: the check only resolves imports)."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / f"_C{SUFFIX}").write_bytes(b"\x7fELF not loaded")
    return f"pkg/_C{SUFFIX}"


def test_import_check_accepts_an_in_place_build(tmp_path: Path) -> None:
    built = fake_build(tmp_path / "tree")
    assert steps.import_problem(tmp_path / "tree", [built, "build/temp/matmul.o"], 60) is None


def test_import_check_refuses_a_build_the_tree_does_not_import(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    fake_build(tree)
    # setup.py build_ext without --inplace: the module only lands under build/lib.*
    problem = steps.import_problem(tree, [f"build/lib.linux-x86_64-cpython-311/pkg/_C{SUFFIX}"], 60)
    assert problem is not None and "build_ext --inplace" in problem


def test_import_check_refuses_a_shadowed_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = fake_build(tmp_path / "tree")
    fake_build(tmp_path / "main-checkout")
    hooks = tmp_path / "site"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        SHADOWING_SITECUSTOMIZE.format(elsewhere=str(tmp_path / "main-checkout"))
    )
    monkeypatch.setenv("PYTHONPATH", str(hooks))
    problem = steps.import_problem(tmp_path / "tree", [built], 60)
    assert problem is not None
    assert f"pkg._C imports from {tmp_path / 'main-checkout'}" in problem and "pip uninstall" in problem


def test_cache_key_follows_sources_not_the_campaign_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(
        root,
        InitOptions(
            name="k", op="x", shapes="shapes.yaml", quick_command="python bench.py", build_command="make"
        ),
    )
    repo = g.open_repo(root)
    manifest = parse_manifest(git(root, "show", "HEAD:campaigns/k/manifest.yaml"), "manifest.yaml")
    tree = tmp_path / "wt"
    first = steps.cache_key(repo, manifest, "HEAD", tree)
    (root / "campaigns" / "k" / "notes.txt").write_text("bookkeeping\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "campaign bookkeeping")
    assert steps.cache_key(repo, manifest, "HEAD", tree) == first
    assert steps.cache_key(repo, manifest, "HEAD", tmp_path / "other-tree") != first
    (root / "kernel.py").write_text("SPEED = 1\n")
    git(root, "commit", "-qam", "a changed source")
    assert steps.cache_key(repo, manifest, "HEAD", tree) != first


def test_a_manifest_written_before_the_build_fields_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    init(root, InitOptions(name="old", op="x", shapes="shapes.yaml", quick_command="python bench.py"))
    data = yaml.safe_load(git(root, "show", "HEAD:campaigns/old/manifest.yaml"))
    for key in ("build_command", "acceptance_command", "workspace"):
        del data[key]
    manifest = parse_manifest(yaml.safe_dump(data), "manifest.yaml")
    assert (manifest.build_command, manifest.acceptance_command, manifest.workspace) == ("", "", [])
    data["execution_mode"] = "workspace"
    with pytest.raises(CampaignError, match="workspace paths"):
        parse_manifest(yaml.safe_dump(data), "manifest.yaml")


@pytest.mark.parametrize("xdist", [True, False])
def test_init_runs_the_tests_in_several_processes_where_pytest_xdist_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xdist: bool
) -> None:
    """On a GPU a round's tests compile its kernels cold, so the default test and acceptance commands
    spread them over up to 16 processes; without pytest-xdist, plain pytest (no -n it cannot parse)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        init_module.importlib.util,
        "find_spec",
        lambda name, *rest: (object() if xdist else None) if name == "xdist" else real(name, *rest),
    )
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    (root / "tests" / "kernels").mkdir(parents=True)
    (root / "tests" / "test_other.py").write_text("")
    (root / "tests" / "kernels" / "test_gemm.py").write_text("")  # the op's default tests must exist
    init(root, InitOptions(name="t", op="gemm", shapes="shapes.yaml", quick_command="python bench.py"))
    manifest = parse_manifest(git(root, "show", "HEAD:campaigns/t/manifest.yaml"), "manifest.yaml")
    spread = " -n auto --maxprocesses 16" if xdist else ""
    assert manifest.test_command == f"python -m pytest -q{spread} tests/kernels/test_gemm.py"
    assert manifest.acceptance_command == f"python -m pytest -q{spread}"


def test_a_build_that_installs_into_the_shared_environment_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pip install .` from one tree puts its build where every tree imports it: refused."""
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(steps, "site_dirs", lambda: [site])
    root = make_project(tmp_path / "proj")
    monkeypatch.chdir(root)
    install = f"{sys.executable} -c \"open({str(site / 'kernel.pth')!r}, 'w').write('/somewhere')\""
    init(
        root,
        InitOptions(
            name="k", op="x", shapes="shapes.yaml", quick_command="python bench.py", build_command=install
        ),
    )
    manifest = parse_manifest(git(root, "show", "HEAD:campaigns/k/manifest.yaml"), "manifest.yaml")
    step = steps.build(g.open_repo(root), manifest, root, "HEAD", tmp_path / "build.log", 60)
    assert step is not None and not step.passed
    assert "installed into the shared environment" in step.output and "kernel.pth" in step.output
    assert "build refused" in (tmp_path / "build.log").read_text()
    (site / "kernel.pth").unlink()
    in_place = f"{sys.executable} -c \"open('built.txt', 'w').write('ok')\""
    manifest.build_command = in_place
    step = steps.build(g.open_repo(root), manifest, root, "HEAD", tmp_path / "build2.log", 60)
    assert step is not None and step.passed and step.cached_from is None
    again = steps.build(g.open_repo(root), manifest, root, "HEAD", tmp_path / "build3.log", 60)
    assert again is not None and again.cached_from is not None  # same sources, same tree: restored
