"""Shared test configuration: tests/ is on sys.path (rootdir conftest), so helper modules import by name."""

import os

os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
# Commands evaluate in their own process in tests (the warm evaluator service is tested in test_service.py): a service
# shared across tests would carry references and caches from one to the next.
os.environ["GEAK_SERVICE"] = "0"
# Compilations are kept between runs in the user's cache (``evaluator/compile_store.py``); tests keep none there, each
# pool its own (test_compile_store.py tests the kept cache in folders of its own).
os.environ["GEAK_COMPILE_CACHE"] = "off"

pytest_plugins = ["scripted_llm"]  # the `scripted_llm` fixture (tests/scripted_llm.py)
