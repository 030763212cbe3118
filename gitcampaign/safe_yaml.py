"""The one reader of YAML that arrives as data: verdict and environment notes, and the committed
manifest, which a pull or an import can bring from anyone.

`yaml.safe_load` builds no objects, but it still expands aliases: a few hundred bytes of nested
anchors (a "billion laughs") become a structure that every later walk over it (the verdict cache's
JSON, a report) multiplies into gigabytes and minutes. Campaign documents are written by
`yaml.dump` of plain data, which never emits an alias, so an alias here is refused outright; a
document is bounded in bytes, nodes and depth before anything is built from it; and what is built
must be plain data (mappings keyed by names, lists, strings, numbers, booleans, null): a date, bytes
or a set (`2026-01-01`, `!!binary`, `!!set`) is refused, as no campaign document holds one and the
readers (the verdict cache's JSON first) would fail on it.
"""

from __future__ import annotations

import yaml

# libyaml when present: about ten times faster than the pure-Python parser.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# A verdict document of a full validation (60 shapes, 50 pairs, 3 sessions) holds about 20k
# numbers in about 0.5 MB; these bounds leave room for ten times that and keep a hostile
# document's cost under a second.
MAX_BYTES = 8 * 1024 * 1024
MAX_NODES = 250_000
MAX_DEPTH = 32


class UnsafeYAML(ValueError):
    """Why a text is not read: invalid YAML, an alias, or over a bound. The message says which."""


def load(text: str | bytes) -> object:
    """The document in `text`, built only after it passed the checks above."""
    size = len(text.encode() if isinstance(text, str) else text)
    if size > MAX_BYTES:
        raise UnsafeYAML(f"{size} bytes, over the {MAX_BYTES} a campaign document may hold")
    try:
        _check_events(text)
        return _plain(yaml.load(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UnsafeYAML(f"not valid YAML ({problem})") from None
    except RecursionError:  # the pure-Python parser, where libyaml is missing
        raise UnsafeYAML(f"nested deeper than {MAX_DEPTH} levels") from None


def _check_events(text: str | bytes) -> None:
    depth = 0
    for nodes, event in enumerate(yaml.parse(text, Loader=_LOADER), start=1):
        if isinstance(event, yaml.AliasEvent):
            raise UnsafeYAML("it uses a YAML alias (*name), which campaign documents never contain")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise UnsafeYAML(f"nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        if nodes > MAX_NODES:
            raise UnsafeYAML(f"over {MAX_NODES} YAML nodes")


_SCALARS = (str, int, float, bool, type(None))


def _plain(value: object) -> object:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise UnsafeYAML(f"a mapping key is {type(key).__name__} {key!r}, not a name")
            _plain(item)
    elif isinstance(value, list):
        for item in value:
            _plain(item)
    elif not isinstance(value, _SCALARS):
        raise UnsafeYAML(f"it holds a {type(value).__name__} value ({str(value)[:40]}), not plain data")
    return value
