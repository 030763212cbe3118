"""The verdict note: a YAML stream on the round commit, one document per event.

A re-measurement, an override or a resumed ref move adds a document; nothing is overwritten.
The last document carrying a `decision` is the round's standing decision.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

import yaml
from git import Repo

from gitcampaign import __version__
from gitcampaign import constants as C
from gitcampaign import git as g

PHASE_BASELINE = "BASELINE"
PHASE_VALIDATE = "VALIDATE"
PHASE_OVERRIDE = "OVERRIDE"
PHASE_REPORT = "REPORT"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster


def parse_stream(raw: bytes | None) -> list[dict[str, Any]]:
    if not raw:
        return []
    return [doc for doc in yaml.load_all(raw.decode(), Loader=_LOADER) if isinstance(doc, dict)]


def read_many(repo: Repo, blobs: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """{commit: documents} for {commit: note blob}, through a cache keyed by blob id.

    Blob ids name their content, so a cached entry can never be stale; it keeps `log` and `status`
    fast on campaigns with hundreds of rounds.
    """
    cache_path = g.common_dir(repo) / "campaign" / "verdict-cache.json"
    try:
        cache: dict[str, list[dict[str, Any]]] = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    missing = {blob for blob in blobs.values() if blob not in cache}
    for blob in missing:
        cache[blob] = parse_stream(g.read_blob(repo, blob))
    if missing:
        live = set(blobs.values())
        cache = {blob: docs for blob, docs in cache.items() if blob in live}
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        scratch = cache_path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(cache))
        scratch.replace(cache_path)
    return {commit: cache[blob] for commit, blob in blobs.items()}


def standing(docs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The document whose decision currently stands (the last one with a decision)."""
    for doc in reversed(docs):
        if doc.get("decision"):
            return doc
    return None


def read(repo: Repo, commit: str) -> list[dict[str, Any]]:
    return parse_stream(g.read_note(repo, C.NOTES_VERDICT, commit))


def render(document: dict[str, Any]) -> bytes:
    """One YAML document of the stream, stamped with the format, tool version and time."""
    document = {"format": C.VERDICT_FORMAT, **document, "tool_version": __version__, "written": now()}
    return b"---\n" + yaml.safe_dump(document, sort_keys=False, width=120, allow_unicode=True).encode()


def append(repo: Repo, commit: str, document: dict[str, Any]) -> None:
    """Add one document to the commit's verdict stream, keeping every earlier byte."""
    existing = g.read_note(repo, C.NOTES_VERDICT, commit)
    if existing is None:
        g.write_note(repo, C.NOTES_VERDICT, commit, render(document))
    else:
        g.write_note(repo, C.NOTES_VERDICT, commit, existing + render(document), replace=True)


def write_csv_note(repo: Repo, notes_ref: str, commit: str, raw: bytes) -> bool:
    """Attach the CSV byte for byte unless the commit already has one (a CSV note is never replaced)."""
    if g.read_note(repo, notes_ref, commit) is not None:
        return False
    g.write_note(repo, notes_ref, commit, raw)
    return True
