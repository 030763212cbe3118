# A plan for benchmarks/campaign_session.sh: the first step of the campaigns past the vendor's best
# path, one an op family, each started on main as the bundle has it, measured and profiled before any hypothesis:
#   git bundle create .xfer/repo.bundle --branches
#   bash benchmarks/campaign_session.sh benchmarks/plans/dogfood-3.sh OUT      # then --attach OUT
# One lane, per campaign: init, prepare, the machine's ceilings once (`calibrate --peaks`, which
# analyze places each shape under), baseline (the A/A floor) and `analyze --ncu` (the profile note on
# the baseline commit: where the time goes, the share of the limit, the bound). The rounds come next,
# each hypothesis naming a bound the profile showed (`git campaign show 1` after the import).

start() {  # start NAME OP SHAPES METRIC: a campaign through its profiled baseline
  git checkout -q main || return  # each campaign from main, not from the one before it
  gc init "$1" --op "$2" --shapes "$3" --metric "$4" --target efficiency=0.95 &&
    gc -c "$1" prepare --no-hooks || return
  # The machine's ceilings, once: the first campaign's environment note serves every later one.
  [[ -n ${peaks_done:-} ]] || { gc -c "$1" calibrate --peaks && peaks_done=1; }
  gc -c "$1" baseline && gc -c "$1" analyze --ncu
}

lane0() {
  start fp8-blockwise-5 gemm_fp8_blockwise llama3.1-8b:mbs=1 step
  start gemm-bf16-3 gemm llama3.1-8b:mbs=1 step
  start grouped-bf16-5 grouped_gemm mixtral-8x7b:mbs=1 step
  start quant-tw-2 quantize_fp8_tensorwise llama3.1-8b-quant:mbs=1 gbs
}
