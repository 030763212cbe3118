#!/usr/bin/env bash
# The three GPU-loop timings of issue 8 ("a GPU loop that fits"), from a cold Triton cache:
#   bash benchmarks/gpu_loop_timing.sh [STAGES] [OUTDIR]     STAGES: comma list, default tests,demo,validate
#   tests     python -m pytest -m gpu (every GPU test)                                target <= 8 min
#   demo      git campaign demo (prepare, baseline, three rounds, report)             target <= 8 min
#   validate  one validate of this repository's gemm on the 4 Llama-3.1-8B mbs=1 shapes, 3 interleaved
#             pairs: the time of its first measurement session (a comment-only round may take up to
#             three sessions before `within_noise`, so the whole command is reported too)  target <= 3 min
# Stages share one budget (BUDGET_S, default 540 s: one 10-minute device call with room to stop);
# each runs under `timeout` with what is left, and a stage cut short says so with the time it had run
# (run the stages in separate calls when they do not fit together). The validate stage's setup
# (init, prepare, a 2-pair baseline) is not part of its figure. Results: OUTDIR/timings.txt.
set -uo pipefail
stages=${1:-tests,demo,validate}
out=$(realpath -m "${2:-out}")
mkdir -p "$out"
project=$PWD
export PYTHONUNBUFFERED=1 PYTHONPATH=$project${PYTHONPATH:+:$PYTHONPATH}
# Cold: no compiled kernel or autotune result from an earlier run (campaign commands key their own
# caches under the scratch repositories' .git, which start empty too).
TRITON_CACHE_DIR=$(mktemp -d)
export TRITON_CACHE_DIR
budget=${BUDGET_S:-540}
started=$(date +%s)
left() { echo $((budget - ($(date +%s) - started))); }
exec 3>&1  # the script's own stdout: a stage's output goes to its files, its timing here
record() { echo "$*" | tee -a "$out/timings.txt" >&3; }
timed() {  # timed NAME COMMAND...: wall seconds and how it ended
  local name=$1 begin end code limit
  shift
  limit=$(left)
  if ((limit < 10)); then
    record "$name: skipped, the budget is spent"
    return
  fi
  begin=$(date +%s.%N)
  # SIGINT, so that a campaign command stops its harness process group as on ^C.
  timeout -s INT -k 30 "$limit" "$@"
  code=$?
  end=$(date +%s.%N)
  local seconds
  seconds=$(python3 -c "print(f'{$end - $begin:.1f}')")
  if ((code == 124)); then
    record "$name: CUT SHORT at ${seconds} s (budget)"
  else
    record "$name: ${seconds} s (exit $code)"
  fi
}

{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU")'
} | tee "$out/versions.txt"

for stage in ${stages//,/ }; do
  case $stage in
  tests)
    timed "pytest -m gpu" python3 -m pytest -q -p no:cacheprovider -m gpu >"$out/gpu-tests.txt" 2>&1
    tail -5 "$out/gpu-tests.txt"
    ;;
  demo)
    rm -rf "$out/demo-repo"
    timed "git campaign demo" python3 -m gitcampaign demo "$out/demo-repo" >"$out/demo.txt" 2>"$out/demo-progress.txt"
    grep -E "^(BASELINE|ROUND|REPORT|  ->)" "$out/demo.txt"
    ;;
  validate)
    repo=$(mktemp -d)/repo
    mkdir -p "$repo"
    cp -r "$project/kernels" "$repo/"
    find "$repo" -name __pycache__ -prune -exec rm -rf {} +
    campaign() { python3 -m gitcampaign -C "$repo" "$@"; }
    (
      set -e
      cd "$repo"
      git init -q -b main
      git config user.name "gpu loop timing" && git config user.email timing@gitcampaign.invalid
      git add . && git commit -qm "this repository's kernels"
      campaign init loop --op gemm --shapes "${LOOP_SHAPES:-llama3.1-8b:mbs=1}" --metric step --pairs 3 \
        --test-command "python3 -c 'import kernels.gemm'" --probe-command ""
      campaign prepare --no-hooks >/dev/null
      timeout -s INT -k 30 "$(left)" python3 -m gitcampaign -C "$repo" baseline --pairs 2 >"$out/validate-baseline.txt" 2>&1
      campaign round -m "timing run: a comment, so the candidate is new code with a cold cache"
      echo "# gpu loop timing round" >>kernels/gemm.py
      git commit -qam $'a comment\n\nHypothesis: none (timing run)\nChange: a comment'
    ) >"$out/validate-setup.txt" 2>&1 || {
      record "validate: setup failed (see validate-setup.txt)"
      continue
    }
    # Plain progress lines (stderr is a file) give each session's wall time, even when cut short.
    timed "validate (whole command)" python3 -m gitcampaign -C "$repo" validate --full --no-probe \
      >"$out/validate.txt" 2>"$out/validate-progress.txt"
    grep -E "^round [0-9]+: " "$out/validate.txt"
    python3 - "$out" <<'EOF' | tee -a "$out/timings.txt"
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
progress = (out / "validate-progress.txt").read_text()
sessions = re.findall(r"^measurement session (\d+): done in (\d+):(\d+)$", progress, re.M)
first = next((int(m) * 60 + int(s) for n, m, s in sessions if n == "1"), None)
print("validate, one session of 4 shapes x 3 pairs: " + (f"{first} s" if first is not None else "not finished")
      + f" ({len(sessions)} session(s) finished)")
EOF
    ;;
  *)
    echo "unknown stage $stage (tests, demo, validate)"
    exit 3
    ;;
  esac
done
record "total: $(($(date +%s) - started)) s"
