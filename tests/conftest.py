"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakeserver import FakeServer


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1 (``base_url`` ends with /v1)."""
    with FakeServer() as server:
        yield server
