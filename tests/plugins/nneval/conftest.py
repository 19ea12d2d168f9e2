"""The ``plugins`` fixture: the toy feature metrics registered for one test."""

import pytest

from tests.plugins.nneval.toys import Features


@pytest.fixture
def plugins(add_plugin):  # type: ignore[no-untyped-def]
    add_plugin(Features(), "nneval-test-features")
