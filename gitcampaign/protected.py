"""What judges a round, and whether a round changed it: the manifest's protected files, the campaign
folder, and new modules where the harness imports from. `validate` rejects such a round as
harness_changed; `round --from` refuses such a candidate before it opens."""

from __future__ import annotations

import posixpath

from git import Repo

from gitcampaign import constants as C
from gitcampaign import git as g
from gitcampaign.manifest import Manifest, sha256_bytes

IMPORTABLE = (".py", ".pyc", ".so", ".pyd", ".pth")
NEW_ON_IMPORT_PATH = " (new on the harness's import path)"  # how protected_changes marks an added module


def protected_changes(
    repo: Repo, manifest: Manifest, incumbent: str, commit: str, changed: list[str]
) -> list[str]:
    """Protected files changed by the round (`changed`: its paths changed against the incumbent), and
    what it added where the harness imports from.

    Named files are hashed; the campaign folder is protected as a whole (a new file there counts);
    so are the harness's import folders (each protected script's folder, and the repository root the
    harness puts on `sys.path`): a new module or package there could shadow what the harness imports.
    """
    protected = []
    for path, digest in manifest.protected_paths.items():
        content = g.read_file_at(repo, commit, path)
        if content is None or sha256_bytes(content) != digest:
            protected.append(path)
    folder = C.campaign_dir(manifest.name) + "/"
    protected += [path for path in changed if path.startswith(folder)]
    import_dirs = {""} | {
        f"{parent}/"
        for path in manifest.protected_paths
        if path.endswith(".py") and (parent := posixpath.dirname(path))
    }
    for path in g.added_paths(repo, incumbent, commit):
        for base in import_dirs:
            if not path.startswith(base):
                continue
            first, _, rest = path[len(base) :].partition("/")
            new_module = not rest and first.endswith(IMPORTABLE)
            new_package = (
                rest.endswith(IMPORTABLE) and g.rev(repo, f"{incumbent}:{base}{first}", peel="") is None
            )
            if new_module or new_package:
                protected.append(path + NEW_ON_IMPORT_PATH)
                break
    return sorted(set(protected))
