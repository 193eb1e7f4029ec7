"""The lines the command line and its warm evaluator service exchange are not cut at asyncio's default 64 KiB: a
result's JSON (a suite file with hundreds of timed calls) is one line far longer than that."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from geak.server.service.client import request
from geak.server.service.protocol import LINE_LIMIT, encode


def test_a_result_line_of_megabytes_reaches_the_command(tmp_path: Path):
    path = tmp_path / "service.sock"
    answer = {"result": {"benches": ["x" * 100 for _ in range(40_000)]}}  # ~4 MB on one line

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        json.loads(await reader.readline())
        writer.write(encode(answer))
        await writer.drain()
        writer.close()

    async def main() -> dict | None:
        server = await asyncio.start_unix_server(serve, path=str(path), limit=LINE_LIMIT)
        async with server:
            return await request(path, {"method": "status"})

    assert asyncio.run(main()) == answer
