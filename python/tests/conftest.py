# pytest setup for the Python package's tests (run by ctest as python_*; docs/python.md):
# PYTHONPATH=build/python and CANZONA_CLI (the `canzona` binary) come from ctest's environment.
import os
import shutil

import pytest


@pytest.fixture(scope="session")
def canzona_cli():
    path = os.environ.get("CANZONA_CLI") or shutil.which("canzona")
    if not path or not os.path.exists(path):
        pytest.fail("CANZONA_CLI is not set to the canzona binary (ctest sets it)")
    return path
