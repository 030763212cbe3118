#!/usr/bin/env python3
"""This repository's own commit messages read as lineage: a subject of at most 72 characters, then a
blank line before the body that explains (docs/contributing.md).

    python .ci/commit_msg.py MSGFILE        as git's commit-msg hook: the message being committed
    python .ci/commit_msg.py [--since REV]  as CI (.ci/run): every commit in REV..HEAD

Campaign rounds are left alone: their message format (`Hypothesis:` and `Change:` lines) belongs to
the tool, whose own hooks check it. With no --since, CI checks every commit after the one main was at
when this rule began; the subjects before it stay as they were published (main is never rewritten).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's gitcampaign, installed or not

from gitcampaign.vocabulary import missing_message_lines  # noqa: E402

MAX_SUBJECT = 72
RULE_SINCE = "1a5fa767c2a836af84abd8098831c668d524fef1"
SCISSORS = " ------------------------ >8 ------------------------"
AUTOSQUASH = ("fixup! ", "squash! ", "amend! ")  # `git commit --fixup` prefixes; squashed away later


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], capture_output=True, text=True)


def problems(message: str) -> list[str]:
    """What keeps a commit message from reading as lineage; none for a campaign round's."""
    lines = message.strip("\n").splitlines()
    if not lines or not missing_message_lines(lines):
        return []  # empty (git refuses it itself), or a round's
    subject = lines[0].rstrip()
    while subject.startswith(AUTOSQUASH):
        subject = subject.split(" ", 1)[1]
    found = []
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject is {len(subject)} characters, over {MAX_SUBJECT}")
    if len(lines) > 1 and lines[1].strip():
        found.append("the second line is not blank (a subject, a blank line, then the body)")
    return found


def edited_message(path: Path) -> str:
    """The message as git will record it: without comment lines and what follows the scissors."""
    char = git("config", "core.commentChar").stdout.strip()
    comment = char if len(char) == 1 else "#"  # unset, or `auto`: git's default
    kept = []
    for line in path.read_text().splitlines():
        if line == comment + SCISSORS:
            break
        if not line.startswith(comment):
            kept.append(line)
    return "\n".join(kept)


def check_message(path: Path) -> int:
    found = problems(edited_message(path))
    for problem in found:
        print(f"commit-msg: {problem}", file=sys.stderr)
    if found:
        print(
            f"hint: a subject of at most {MAX_SUBJECT} characters, a blank line, then the body that explains; "
            "`git commit --amend` on it (your message is kept in .git/COMMIT_EDITMSG)",
            file=sys.stderr,
        )
    return 1 if found else 0


def check_range(since: str) -> int:
    if git("cat-file", "-e", f"{since}^{{commit}}").returncode != 0:
        print(f"commit-msg: {since[:12]} is not in this clone (a shallow one?): checking HEAD alone")
        commits = ["HEAD"]
    else:
        listed = git("rev-list", f"{since}..HEAD")
        if listed.returncode != 0:
            print(f"commit-msg: git rev-list failed: {listed.stderr.strip()}", file=sys.stderr)
            return 2
        commits = listed.stdout.split()
    bad = 0
    for commit in commits:
        message = git("log", "-1", "--format=%B", commit).stdout
        for problem in problems(message):
            bad += 1
            print(f"{commit[:12]} {message.splitlines()[0][:60]!r}: {problem}")
    print(f"commit-msg: {len(commits)} commit(s) since {since[:12]}, {bad} problem(s)")
    if bad:
        print(
            "hint: reword them before they land (`git rebase -i`, then `reword`); "
            "main's published history is never rewritten"
        )
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("message_file", nargs="?", type=Path, help="the message git is committing")
    parser.add_argument("--since", help=f"check the commits in SINCE..HEAD (CI; default {RULE_SINCE[:12]})")
    args = parser.parse_args()
    if args.message_file is not None:
        return check_message(args.message_file)
    return check_range(args.since or RULE_SINCE)


if __name__ == "__main__":
    sys.exit(main())
