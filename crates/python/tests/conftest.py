"""Shared fixtures: a fresh store directory per test (a real directory, real fsyncs)."""

import pytest

import deadletter


@pytest.fixture
def store(tmp_path):
    """A durable store in a fresh directory, closed after the test."""
    with deadletter.Store(tmp_path / "store") as s:
        yield s


@pytest.fixture
def fast_store(tmp_path):
    """A store that never fsyncs (for tests that move many messages)."""
    with deadletter.Store(tmp_path / "store", durable=False) as s:
        yield s
