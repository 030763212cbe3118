# A plan for benchmarks/campaign_session.sh: the campaigns past the vendor's best path, one an op
# family, each started on main as the bundle has it and profiled before any hypothesis:
#   git bundle create .xfer/repo.bundle --branches
#   LANE_S=1450 bash benchmarks/campaign_session.sh benchmarks/plans/dogfood-3.sh OUT   # then --attach OUT
# Per campaign: init, prepare, the machine's ceilings once (`calibrate --peaks`, which analyze places
# each shape under), baseline (the A/A floor) and `analyze --ncu` (the profile note on the baseline
# commit: where the time goes, the share of the limit, the bound). Then one heat of the candidate
# branches (cand/*, each one commit on main whose hypothesis names the bound the profile showed) and
# the report with the next three hypotheses. In order of the families' distance from their targets,
# so that a budget spent early cuts the last ones.
# The acceptance suite is the kernels' tests: the project's whole suite does not pass in a campaign's
# tree (its campaign folder holds the frozen harness that main keeps only in the bundle) nor on the
# lent machine (no editor, no submitit, no nvdisasm where its tests look), 6 minutes to learn that.
# The first session of this plan (12-06 05:01, docs/benchmarks/2026-12-06-0501-dogfood-3.md) kept
# fp8-blockwise-5 (profiled baseline, a heat of the two blockwise candidates, no report) and
# gemm-bf16-3 (profiled baseline), both with the whole suite as their acceptance command.

start() {  # start NAME OP SHAPES METRIC: a campaign through its profiled baseline
  git checkout -q main || return  # each campaign from main, not from the one before it
  gc init "$1" --op "$2" --shapes "$3" --metric "$4" --target efficiency=0.95 --pairs 2 \
    --acceptance-command "python -m pytest -q tests/kernels" &&
    gc -c "$1" prepare --no-hooks || return
  # The machine's ceilings, once: the first campaign's environment note serves every later one.
  [[ -n ${peaks_done:-} ]] || { gc -c "$1" calibrate --peaks && peaks_done=1; }
  gc -c "$1" baseline && gc -c "$1" analyze --ncu
}

heat() {  # heat NAME BRANCH...: each candidate branch a round of one heat, decided by one validate
  local name=$1 ref
  shift
  for ref in "$@"; do
    gc -c "$name" round --heat --from "xfer/$ref" || return
  done
  gc -c "$name" validate --heat
}

report() {  # report NAME HYPOTHESIS...: the report (one pair: the heat measured the rounds), its next rounds
  local name=$1 next=() text
  shift
  for text in "$@"; do
    next+=(--next "$text")
  done
  gc -c "$name" report --force --pairs 1 "${next[@]}"
}

lane0() {
  # fp8-blockwise-5's heat again, on today's main (the probe judged by each side's fastest run; the
  # TMA scratch fix) and with the kernels' tests as the acceptance suite.
  start fp8-blockwise-6 gemm_fp8_blockwise llama3.1-8b:mbs=1 step &&
    heat fp8-blockwise-6 cand/bw-dualquant cand/bw-dualquant-a
  report fp8-blockwise-6 \
    "compute: the Gluon GEMM runs at 65-66% SM throughput, 23% occupancy, its warps stalled first at barriers (ncu, fp8-blockwise-5): the consumers wait for each 128-deep product before promoting it; a fourth consumer warpgroup (256x128 tile) keeps three products queued during each promotion" \
    "memory: dA's operand is b's 128x128 codes transposed by a launch of their own (_transposed, 46-81% of DRAM peak) and the backward makes kb-major scale copies in three torch launches; the forward's block128 quantiser can write the transposed codes and kb-major scales from the tile it holds" \
    "launch: the backward is 12 launches for two products; the quantisers of a.T and dOut.T (one after the dual quantiser) and the scale copies can share one launch of a two-tensor quantiser"
  start grouped-bf16-5 grouped_gemm mixtral-8x7b:mbs=1 step &&
    heat grouped-bf16-5 cand/grouped-1 cand/grouped-2
  report grouped-bf16-5 \
    "compute: the grouped forward and dA walk one expert's rows at a time; a persistent order that interleaves the experts' tiles keeps each wave's operand reuse in L2 as the dense kernel's GROUP_M order does" \
    "compute: skewed routings leave the last wave of a hot expert's tiles short; splitting the hottest expert's K loop two ways fills it" \
    "memory: dB reads dOut and a along M per expert with a transposed descriptor; a 128x256 output tile with 4 stages halves the reloads of a"
  start gemm-bf16-4 gemm llama3.1-8b:mbs=1 step &&
    heat gemm-bf16-4 cand/bf16-bk128 cand/bf16-256x128s4
  report gemm-bf16-4 \
    "compute: o's 1024 tiles of 128x256 fill 7.76 waves of 132 SMs, so a quarter of the last wave idles; splitting only the last wave's tiles two ways along K (data-parallel before it) fills it" \
    "compute: a Gluon kernel warp-specialised by hand, two consumer warpgroups in ping-pong so that one's epilogue runs under the other's wgmma, as cuBLAS's sm90 kernels do (Triton's automatic specialisation picked no such tile)" \
    "memory: 2-CTA clusters that multicast the shared operand tile by TMA halve the L2-to-SM bytes a flop on 128x256 tiles"
  start quant-tw-2 quantize_fp8_tensorwise llama3.1-8b-quant:mbs=1 gbs
  # The fused quantiser's bit-exactness on the GPU (the heat's gate runs the fp8 GEMM's tests only),
  # and the CUDA-graph tests on main since the TMA scratch fix (12-06), each in a fresh process.
  from_tree quant-both xfer/cand/bw-dualquant-a python3 -m pytest -q -p no:cacheprovider tests/kernels/test_quant.py -k both
  from_tree graphs xfer/main python3 -m pytest -q -p no:cacheprovider tests/kernels/test_compile_and_graphs_gpu.py
}
