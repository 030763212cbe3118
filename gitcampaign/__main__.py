"""`python -m gitcampaign` = `git campaign` (hooks use it when git-campaign is not on PATH)."""

from __future__ import annotations

import sys

from gitcampaign.cli import main

sys.exit(main())
