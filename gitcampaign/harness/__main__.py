"""`python -m gitcampaign.harness --op OP --backend B [--root DIR] ...`: the harness run from the
package, on a shipped op's spec (or `--op-spec PATH`), measuring the kernels under --root (default:
the current directory). A campaign runs its frozen single-file copy instead."""

from __future__ import annotations

import sys
from pathlib import Path

from gitcampaign.harness.main import main
from gitcampaign.harness.ops import spec_of


def run(argv: list[str]) -> int:
    extra: list[str] = []
    if "--op" in argv and "--op-spec" not in argv:
        op = argv[argv.index("--op") + 1]
        found = spec_of(op)
        if found is not None:
            extra += ["--op-spec", str(found[0])]
    if "--root" not in argv:
        extra += ["--root", str(Path.cwd())]
    return main(argv + extra)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
