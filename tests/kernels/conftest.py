"""Fixtures of the kernel tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch


@pytest.fixture
def nan_poisoned_empty(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make torch.empty return NaN-filled floats, so any output element a kernel skips shows up."""
    real_empty: Callable[..., torch.Tensor] = torch.empty

    def poisoned(*size: object, **kwargs: object) -> torch.Tensor:
        tensor = real_empty(*size, **kwargs)
        return tensor.fill_(float("nan")) if tensor.is_floating_point() else tensor

    monkeypatch.setattr(torch, "empty", poisoned)
    yield
