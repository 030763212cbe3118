"""gitcampaign: git-native GPU-kernel optimisation campaigns."""

from __future__ import annotations

__version__ = "0.1.0"
