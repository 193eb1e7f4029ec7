"""Parameters of GEAK's custom requests and commands: pygls hands custom params over as namedtuples (or lists);
these helpers turn them into plain data and validate them with one clear error each."""

from __future__ import annotations

from typing import Any

from lsprotocol import converters
from pygls.exceptions import JsonRpcInvalidParams

CONVERTER = converters.get_converter()


def plain(value: Any) -> Any:
    """namedtuples (pygls' custom params) -> dicts, recursively."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message)


def document_uri(params: Any, method: str) -> str:
    data = plain(params)
    doc = data.get("textDocument") if isinstance(data, dict) else None
    uri = doc.get("uri") if isinstance(doc, dict) else None
    if not isinstance(uri, str) or not uri:
        raise invalid(f"{method}: params must be {{'textDocument': {{'uri': str}}, ...}}")
    return uri


def optional(data: dict, key: str, kind: type, method: str) -> Any:
    value = data.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise invalid(f"{method}: {key} must be a {kind.__name__} or null, not {type(value).__name__}")
    return value


def optimize_params(params: Any) -> tuple[str, str | None, int | None, Any]:
    """(uri, kernel, version, workDoneToken) of a geak/optimize request."""
    method = "geak/optimize"
    uri = document_uri(params, method)
    data = plain(params)
    token = data.get("workDoneToken")
    if token is not None and (not isinstance(token, (str, int)) or isinstance(token, bool)):
        raise invalid(f"{method}: workDoneToken must be a string or an integer")
    return uri, optional(data, "kernel", str, method), optional(data, "version", int, method), token


def command_args(args: tuple, command: str, count: int) -> list[Any]:
    """The arguments of a command `[uri, ...]`, padded with None to `count`."""
    values = [plain(a) for a in args]
    if not values or not isinstance(values[0], str) or len(values) > count:
        raise invalid(f"{command}: arguments must be [uri{', ...' if count > 1 else ''}] (at most {count})")
    return values + [None] * (count - len(values))
