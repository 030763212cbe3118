# A plan for benchmarks/campaign_session.sh: the campaigns past the vendor's best path, one an op
# family, each started on main as the bundle has it and profiled before any hypothesis:
#   git bundle create .xfer/repo.bundle --branches
#   LANE_S=1450 bash benchmarks/campaign_session.sh benchmarks/plans/dogfood-3.sh OUT   # then --attach OUT
# Per campaign: init, prepare, the machine's ceilings once (`calibrate --peaks`, which analyze places
# each shape under), baseline (the A/A floor) and `analyze --ncu` (the profile note on the baseline
# commit: where the time goes, the share of the limit, the bound). Then one heat of the candidate
# branches (cand/*, each one commit on main whose hypothesis names the bound the profile showed: the
# family's earlier profiles, docs/benchmarks/) and the report with the next three hypotheses. In the
# order of the families' distance from their targets, so that a budget spent early cuts the last ones.

start() {  # start NAME OP SHAPES METRIC: a campaign through its profiled baseline
  git checkout -q main || return  # each campaign from main, not from the one before it
  gc init "$1" --op "$2" --shapes "$3" --metric "$4" --target efficiency=0.95 --pairs 2 &&
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
  start fp8-blockwise-5 gemm_fp8_blockwise llama3.1-8b:mbs=1 step &&
    heat fp8-blockwise-5 cand/bw-dualquant cand/bw-dualquant-a
  report fp8-blockwise-5 \
    "compute: dA's product (dOut by b's 128x128 blocks) runs at 0.80-0.95 of cuBLAS block scaling with the tensor cores idle while a consumer promotes; a 256x128 tile of four consumer warpgroups keeps three products queued during each promotion" \
    "memory: b's 128x128 codes are transposed for dA in a launch of their own (_transposed), a read and a write of b's codes each step; the forward's block128 quantiser can write both layouts from the tile it holds" \
    "host: the forward at qkv is host-bound (3 launches, host time above GPU time a call); quantising a and b in one launch of a two-operand quantiser removes one launch and its host cost"
  start gemm-bf16-3 gemm llama3.1-8b:mbs=1 step &&
    heat gemm-bf16-3 cand/bf16-bk128 cand/bf16-256x128s4
  report gemm-bf16-3 \
    "compute: o's 1024 tiles of 128x256 fill 7.76 waves of 132 SMs, so a quarter of the last wave idles; splitting only the last wave's tiles two ways along K (data-parallel before it) fills it" \
    "compute: a Gluon kernel warp-specialised by hand, two consumer warpgroups in ping-pong so that one's epilogue runs under the other's wgmma, as cuBLAS's sm90 kernels do (Triton's automatic specialisation picked no such tile)" \
    "memory: 2-CTA clusters that multicast the shared operand tile by TMA halve the L2-to-SM bytes a flop on 128x256 tiles, where the step's L2 traffic caps the tensor pipe on gate_up"
  start quant-tw-2 quantize_fp8_tensorwise llama3.1-8b-quant:mbs=1 gbs
  start grouped-bf16-5 grouped_gemm mixtral-8x7b:mbs=1 step
  # The fused quantiser's bit-exactness on the GPU (the heat's gate runs the fp8 GEMM's tests only).
  from_tree quant-both xfer/cand/bw-dualquant-a python3 -m pytest -q -p no:cacheprovider tests/kernels/test_quant.py -k both
}
