#!/usr/bin/env bash
# Run campaign steps on a bare GPU machine and bring the lineage back, one lane per GPU:
#   bash benchmarks/campaign_session.sh PLAN OUTDIR       start the lanes, wait for them, bring back
#   bash benchmarks/campaign_session.sh --attach OUTDIR   a later command on the same machine: wait again
# The project arrives as a git bundle of its branches (REPO_BUNDLE, default .xfer/repo.bundle: make it
# with `git bundle create .xfer/repo.bundle --branches`); every campaign already kept in the tree
# (campaigns/NAME/lineage.bundle) is imported first, so rounds continue where the last machine stopped.
# PLAN is a bash file defining lane0, lane1, ... (lane N runs on GPU N mod the GPU count, in its own
# clone; lanes on different GPUs at once, lanes that share a GPU one after the other, in lane order,
# so that a plan written for two GPUs also runs on one; GPUS overrides the count nvidia-smi gives);
# inside a lane:
#   gc ARGS...            git campaign ARGS in the lane's clone (stops the lane when the budget is spent;
#                         a validate starts only with VALIDATE_S seconds left, default 330: one cut short
#                         loses its sessions with the machine, and a gain under 2% takes two of ~2:30)
#   round_from NAME REF [ARGS...]   `git campaign round --from` commit REF (a branch of the bundle,
#                         its message with the Hypothesis:/Change: lines), then validate it (ARGS)
#   timed NAME CMD...     any other command (a benchmark script), output in the lane's log as NAME; it
#                         runs in the lane's clone as checked out at that moment, and campaign steps move
#                         its HEAD (a round checks out its branch): for main's copy, `from_tree NAME xfer/main`
#   from_tree NAME REF CMD...   `timed NAME CMD` in a copy of REF's tree (a candidate branch of the
#                         bundle, xfer/BRANCH), first on PYTHONPATH: a dev script on a kernel not yet in a round
#   passed NAME           whether the pytest run by the command NAME passed (a gate before the steps
#                         that need it: `passed sanity || return`; a hang cut by its timeout did not)
#   stage NAME            what campaign NAME needs next, as the lane's clone holds it (kept campaigns
#                         imported): init, baseline, analyze (no profile yet), heat (no round yet),
#                         validate (rounds open or pending), report, done (its REPORT.md is on its
#                         main), or "unknown: WHY"; so that a plan run again in a later session goes
#                         on where the last one stopped
#   $LANE_LOG             the lane's log folder (comes back in OUTDIR/laneN.tgz): for a command's own files
# A lane that sets no CUDA_VISIBLE_DEVICES of its own (unset it) can use every GPU (--gpus 0,1).
# The lanes run detached from the command, so that a plan may outlast the per-command limit of a lent
# machine: a command waits at most CALL_S seconds (default 560), then brings back what the lanes have
# done so far; `--attach` in the next command, while the machine is still held, waits again. LANE_S
# (default 520) is each lane's budget in seconds, counted from the start. SESSION_ROOT (default /tmp)
# holds the session's state and the lanes' clones.
# After every campaign command a lane runs `git campaign export` of each campaign the command named
# or moved (not those imported from the tree and left alone), so OUTDIR/laneN.tgz holds, at any
# time, log/NAME.bundle of each (for `git campaign import` at home), every command's output and the
# runs' logs.
set -uo pipefail
root=${SESSION_ROOT:-/tmp}  # where the session's state and the lanes' clones live
state=$root/campaign-session
self=$(realpath "$0")
export PYTHONUNBUFFERED=1
left() { echo $((LANE_S - ($(date +%s) - $(cat "$state"/started)))); }

lane() {  # lane N GPU: clone, import kept campaigns, run laneN on the GPU, export
  local n=$1 gpu=$2 dir=$root/campaign-lane$1
  git clone -q -b main "$bundle" "$dir/repo" || return
  cd "$dir/repo" || return
  git config user.name "gitcampaign dogfood" && git config user.email dogfood@gitcampaign.invalid
  git fetch -q "$bundle" 'refs/heads/*:refs/remotes/xfer/*'  # candidates: round_from NAME BRANCH
  export CUDA_VISIBLE_DEVICES=$gpu PYTHONPATH=$dir/repo${PYTHONPATH:+:$PYTHONPATH} LANE_LOG=$dir/log
  # A round's tests compile its kernels cold: in 16 processes where pytest-xdist is installed, also for
  # campaigns whose test command predates `init`'s -n default.
  python3 -c "import xdist" 2>/dev/null && export PYTEST_ADDOPTS="-n 16"
  # The tool runs from main's copy, taken now: `python -m gitcampaign` in the clone would import the
  # checked-out round's gitcampaign, so a round (or a campaign started before a fix) would run, and
  # could change, the code that judges it.
  mkdir -p "$dir/tool" && git archive HEAD gitcampaign | tar -x -C "$dir/tool" || return
  printf '%s\n' 'import sys' 'from gitcampaign.cli import main' 'sys.exit(main())' >"$dir/tool/git-campaign.py"
  local step=0
  refs_of() {  # a campaign's own refs (branches, pins), as they stand
    git for-each-ref --format='%(refname) %(objectname)' "refs/heads/campaign/$1/" "refs/campaign/$1/"
  }
  campaigns() {
    git for-each-ref --format='%(refname:lstrip=2)' 'refs/heads/campaign/*/main' | sed 's|^campaign/||; s|/main$||'
  }
  keep() {  # the lineage and log of every campaign whose refs moved since the last look, and of $1
    # (the step's campaign, whose notes may have moved alone). Not every campaign's after every step:
    # with twenty imported, that took 20-27 s a step (12-06), the notes refs that all of them share
    # moving with any one campaign's step.
    local name
    mkdir -p "$dir/kept"
    for name in $(campaigns); do
      [[ $name != "${1:-}" && $(refs_of "$name") == "$(cat "$dir/kept/$name" 2>/dev/null)" ]] && continue
      python3 "$dir/tool/git-campaign.py" export "$name" "$dir/log/$name.bundle" >/dev/null 2>&1
      python3 "$dir/tool/git-campaign.py" -c "$name" log >"$dir/log/$name-log.txt" 2>&1
      refs_of "$name" >"$dir/kept/$name"
    done
  }
  seen() {  # the campaigns as they stand now count as kept: the imported ones are on main already
    local name
    mkdir -p "$dir/kept"
    for name in $(campaigns); do
      refs_of "$name" >"$dir/kept/$name"
    done
  }
  step_campaign() {  # the campaign a `git campaign` command names: -c NAME, or init's NAME
    while (($#)); do
      [[ $1 == -c || $1 == init ]] && echo "${2:-}" && return
      shift
    done
  }
  gc() {
    local limit
    limit=$(left)
    step=$((step + 1))
    if ((limit < 20)); then
      echo "lane$n step $step: skipped (budget spent): git campaign $*" | tee -a "$dir/log/steps.txt"
      return 1
    fi
    if [[ " $* " == *" validate "* ]] && ((limit < ${VALIDATE_S:-330})); then
      echo "lane$n step $step: skipped (${limit}s left, a validate wants VALIDATE_S=${VALIDATE_S:-330}):" \
        "git campaign $*" | tee -a "$dir/log/steps.txt"
      return 1
    fi
    echo "lane$n step $step $(date -u +%T) (${limit}s left): git campaign $*" | tee -a "$dir/log/steps.txt"
    timeout -s INT -k 30 "$limit" python3 "$dir/tool/git-campaign.py" "$@" >"$dir/log/$step.out" 2>"$dir/log/$step.err"
    local code=$?
    echo "lane$n step $step $(date -u +%T): exit $code" | tee -a "$dir/log/steps.txt"
    tail -3 "$dir/log/$step.out" | sed "s/^/lane$n   /" | tee -a "$dir/log/steps.txt"
    [[ $1 == import ]] || keep "$(step_campaign "$@")"
    return $code
  }
  round_from() {
    local name=$1 ref=$2
    shift 2
    gc -c "$name" round --from "xfer/$ref" && gc -c "$name" validate "$@"
  }
  timed() {
    local name=$1 limit
    shift
    limit=$(left)
    ((limit < 20)) && return 1
    echo "lane$n $(date -u +%T) (${limit}s left): $name: $*" | tee -a "$dir/log/steps.txt"
    timeout -s INT -k 10 "$limit" "$@" >"$dir/log/$name.txt" 2>&1
    echo "lane$n $(date -u +%T): $name exit $?" | tee -a "$dir/log/steps.txt"
  }
  from_tree() {
    local name=$1 ref=$2 tree=$dir/trees/$1
    shift 2
    rm -rf "$tree" && mkdir -p "$tree" && git archive "$ref" | tar -x -C "$tree" || return
    timed "$name" env -C "$tree" PYTHONPATH="$tree:$PYTHONPATH" "$@"
  }
  passed() {
    local summary
    summary=$(grep -E " in [0-9.]+s" "$dir/log/$1.txt" 2>/dev/null | tail -1)
    [[ $summary == *passed* && $summary != *failed* && $summary != *error* ]]
  }
  stage() {
    local status
    git rev-parse -q --verify "refs/heads/campaign/$1/main" >/dev/null || { echo init; return; }
    git cat-file -e "campaign/$1/main:campaigns/$1/REPORT.md" 2>/dev/null && { echo done; return; }
    # stdout only: a warning on stderr (a note of a commit gone, say) says nothing of the stage
    status=$(python3 "$dir/tool/git-campaign.py" -c "$1" status --json 2>"$dir/log/stage.err")
    python3 -c '
import json, sys
try:
    status = json.loads(sys.argv[1])
    rounds = status["rounds"]
    waiting = rounds["open"] + rounds["pending"] + rounds["empty"]
    decided = rounds["accepted"] + rounds["rejected"]
except (ValueError, KeyError, TypeError):
    sys.exit(print("unknown: git campaign status: " + " ".join(sys.argv[2].split())[-300:]))
print("baseline" if not status["baseline"] else "validate" if waiting else "report" if decided
      else "analyze" if not status["profile"] else "heat")' "$status" "$(cat "$dir/log/stage.err")"
  }
  local f kept
  for f in campaigns/*/lineage.bundle; do
    [[ -f $f ]] || continue
    gc import "$f"
    # An imported campaign runs none of its commands before this clone approves them: the session
    # runs the plan its author wrote on the campaigns of the author's own repository, so it does.
    kept=${f#campaigns/}
    python3 "$dir/tool/git-campaign.py" trust --campaign "${kept%/lineage.bundle}" >>"$dir/log/steps.txt" 2>&1
  done
  seen
  "lane$n"
  keep
}

snapshot() {  # OUTDIR/laneN.tgz: each lane's log as it stands, with the harness and test logs of every run
  local n dir
  for n in $(cat "$state"/lanes); do
    dir=$root/campaign-lane$n
    (cd "$dir/repo/.git/campaign/runs" 2>/dev/null && find . -type f \( -name '*.log' -o -name '*.csv' \
      -o -name '*.json' \) -size -4M -exec cp -p --parents {} "$dir/log/runs/" \;) 2>/dev/null
    # A command's own files under $LANE_LOG may hold a scratch repository (the demo's): its compiled
    # kernels and bytecode (hundreds of MB) would keep the tarball from coming back.
    tar czf "$out/lane$n.tgz" --warning=no-file-changed --exclude=triton-cache --exclude=python-cache \
      -C "$dir" log
  done
}

wait_lanes() {  # until every lane is done or CALL_S has passed
  local begin n running
  begin=$(date +%s)
  while true; do
    running=()
    for n in $(cat "$state"/lanes); do
      [[ -f $root/campaign-lane$n/done ]] || running+=("$n")
    done
    ((${#running[@]} == 0)) && echo "all lanes done after $(($(date +%s) - $(cat "$state"/started))) s" && return 0
    if (($(date +%s) - begin >= ${CALL_S:-560})); then
      echo "lanes ${running[*]} still running after $(($(date +%s) - $(cat "$state"/started))) s:" \
        "bring them back with \`--attach\` in the next command while this machine is held"
      return 0
    fi
    sleep 5
  done
}

if (($# < 2)); then
  echo "usage: bash benchmarks/campaign_session.sh PLAN OUTDIR | --attach OUTDIR" >&2
  exit 2
fi
if [[ $1 == --gpu ]]; then  # detached, the lanes of one GPU in turn: --gpu GPU PLAN BUNDLE N...
  gpu=$2 plan=$3 bundle=$4
  shift 4
  # shellcheck source=/dev/null
  source "$plan"
  for n in "$@"; do
    (lane "$n" "$gpu") >"$root/campaign-lane$n/log/lane.out" 2>&1 </dev/null
    touch "$root/campaign-lane$n/done"
  done
  exit 0
fi
if [[ $1 == --attach ]]; then
  out=$(realpath -m "$2")
  if [[ ! -f "$state"/lanes ]]; then
    echo "no campaign session on this machine: it started bare, so the lanes of the earlier command are lost;" \
      "start them again with PLAN" >&2
    exit 3
  fi
else
  plan=$(realpath "$1")
  out=$(realpath -m "$2")
  bundle=$(realpath -m "${REPO_BUNDLE:-.xfer/repo.bundle}")
  if ! git bundle list-heads "$bundle" 2>/dev/null | grep -q ' refs/heads/main$'; then
    echo "$bundle is not a bundle with a branch main, which every lane clones: make it in the checkout" \
      "to run with \`git bundle create .xfer/repo.bundle --branches\` (or point REPO_BUNDLE at one)" >&2
    exit 2
  fi
  rm -rf "$state" "$root"/campaign-lane[0-9]* "$root"/campaign-gpu[0-9]*.out
  mkdir -p "$state"
  # The lanes read their own copies: a later command's copy of the working tree may rewrite these files.
  cp "$self" "$state"/session.sh && cp "$plan" "$state"/plan.sh
  date +%s >"$state"/started
  # shellcheck source=/dev/null
  source "$plan"
  declare -F | awk '{print $3}' | sed -n 's/^lane\([0-9]\+\)$/\1/p' >"$state"/lanes
  gpus=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
  ((gpus > 0)) || gpus=1
  for n in $(cat "$state"/lanes); do
    mkdir -p "$root/campaign-lane$n/log/runs"
  done
  for ((gpu = 0; gpu < gpus; gpu++)); do
    mine=$(awk -v g="$gpu" -v c="$gpus" '$1 % c == g' "$state"/lanes)
    [[ -n $mine ]] || continue
    # shellcheck disable=SC2086  # the lane numbers, one word each
    LANE_S=${LANE_S:-520} setsid bash "$state"/session.sh --gpu "$gpu" "$state"/plan.sh "$bundle" $mine \
      >"$root/campaign-gpu$gpu.out" 2>&1 </dev/null &
  done
fi
mkdir -p "$out"
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
} 2>&1 | tee "$out/versions.txt"
wait_lanes
snapshot
cat "$root"/campaign-lane*/log/steps.txt 2>/dev/null | grep -v '^lane[0-9]   *refs/'
for n in $(cat "$state"/lanes); do  # a lane that ended before its first step: say why
  dir=$root/campaign-lane$n
  if [[ -f $dir/done && ! -s $dir/log/steps.txt ]]; then
    echo "lane$n ended before its first step:"
    tail -5 "$dir/log/lane.out" | sed "s/^/lane$n   /"
  fi
done
