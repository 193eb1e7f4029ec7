"""Shared test configuration: tests/ is on sys.path (rootdir conftest), so helper modules import by name."""

import os

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

pytest_plugins = ["scripted_llm"]  # the `scripted_llm` fixture (tests/scripted_llm.py)
