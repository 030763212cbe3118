# A plan for benchmarks/campaign_session.sh, after dogfood-3.sh's third session (12-06 10:35): the
# harnesses that gemm-bf16-4 and quant-tw-2 froze listed torch.profiler's step range among each
# forward's kernels, so their profiles read each forward at half its share of the limit, and their
# reports quote those profiles. `analyze` now reads such a file without the range
# (gitcampaign/profile.py): profile each baseline again (the note is appended, the first one kept)
# and report again with the same next hypotheses. Then the harness's profile on the GPU, the host's
# cost a call of the fp8 ops (the o shape's fp8 steps read host-bound in that session's
# best_vendor.py) and the fp8 table again, on this machine.
#   LANE_S=700 bash benchmarks/campaign_session.sh benchmarks/plans/dogfood-3-reprofile.sh OUT
# gemm_next and quant_next (campaign_session.sh sources a copy of this file, from the repository root)
source benchmarks/plans/dogfood-3.sh

lane0() {
  local name
  for name in gemm-bf16-4 quant-tw-2; do
    gc -c "$name" analyze 1 --ncu || return
  done
  again gemm-bf16-4 "${gemm_next[@]}"
  again quant-tw-2 "${quant_next[@]}"
  from_tree gpu-profile-test xfer/main python3 -m pytest -q -p no:cacheprovider \
    tests/test_quick_harness.py -k gpu_profile
  from_tree host-cost xfer/main python3 benchmarks/host_cost.py --repeats 3 \
    --ops gemm,gemm_fp8-tensorwise,gemm_fp8-rowwise,gemm_fp8-blockwise
  from_tree best-vendor-fp8 xfer/main python3 benchmarks/best_vendor.py --op fp8 --json "$LANE_LOG/best_vendor_fp8.json"
}

again() {  # again NAME HYPOTHESIS...: report a reported campaign again (its profile note is newer)
  local name=$1 next=() text
  shift
  for text in "$@"; do
    next+=(--next "$text")
  done
  gc -c "$name" report --force --pairs 1 "${next[@]}"
}
