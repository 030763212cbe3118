#!/usr/bin/env bash
# The candidates of benchmarks/plans/dogfood-3.sh, kept here as patches (one commit each, `git
# format-patch --base`), so that the repository holds them and not only one clone's branches:
#   bash benchmarks/plans/dogfood-3/branches.sh     # makes each missing branch cand/NAME from NAME.patch
# on the commit its base-commit line names, in a worktree of its own (the checkout is left alone);
# then `git bundle create .xfer/repo.bundle --branches` takes them to the GPU machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for patch in "$here"/*.patch; do
  branch=cand/$(basename "$patch" .patch)
  if git rev-parse -q --verify "refs/heads/$branch" >/dev/null; then
    echo "$branch: kept as it is"
    continue
  fi
  base=$(sed -n 's/^base-commit: //p' "$patch")
  if [[ -z $base ]] || ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    echo "$patch: its base commit ${base:-(none named)} is not in this clone: fetch main's history" >&2
    exit 1
  fi
  git worktree add -q -b "$branch" "$scratch/$branch" "$base"
  if ! git -C "$scratch/$branch" am -q --committer-date-is-author-date "$patch"; then
    git -C "$scratch/$branch" am --abort
    git worktree remove --force "$scratch/$branch"
    git branch -q -D "$branch"
    echo "$patch: does not apply on $base" >&2
    exit 1
  fi
  git worktree remove "$scratch/$branch"
  echo "$branch: made on ${base:0:12}"
done
