"""Shared test configuration: tests/ is on sys.path (rootdir conftest), so helper modules import by name."""

import os

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
