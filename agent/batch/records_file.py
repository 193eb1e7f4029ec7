"""Result records in JSONL files (`geak run`'s results.jsonl, `geak eval`'s records.jsonl): read back after a crash
or Ctrl-C, past a line torn mid-write, and rewritten atomically before a resumed run appends to them."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def read_records(path: Path, key: str) -> list[dict[str, Any]]:
    """The records of `path` that have `key`; a line cut short by a crash is ignored (its problem runs again)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            log.warning("ignoring an incomplete line of %s", path)
            continue
        if isinstance(record, dict) and key in record:
            records.append(record)
    return records


def rewrite_records(path: Path, records: list[dict[str, Any]]) -> None:
    """Replace `path` with `records` at once (a kill mid-write leaves the old file): drops a torn line, so appends
    start on a line of their own."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    os.replace(tmp, path)


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one finished record, on disk before this returns (a crash right after loses nothing)."""
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())
