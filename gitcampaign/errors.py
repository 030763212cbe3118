"""The one error type users see."""

from __future__ import annotations


class CampaignError(Exception):
    """A user-facing error: what went wrong, and a hint naming the command that fixes it."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\nhint: {self.hint}" if self.hint else self.message


class CampaignWarning(UserWarning):
    """Something a command skipped and went on without (a damaged note): library code warns with
    `warnings.warn(CampaignWarning(...))`, the CLI prints it as `warning: ...` on stderr."""
