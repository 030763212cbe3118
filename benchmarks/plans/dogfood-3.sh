# A plan for benchmarks/campaign_session.sh: the campaigns past the vendor's best path, one an op
# family, each started on main as the bundle has it and profiled before any hypothesis:
#   bash benchmarks/plans/dogfood-3/branches.sh   # the candidates (cand/*), from the patches kept there
#   git bundle create .xfer/repo.bundle --branches
#   LANE_S=1600 bash benchmarks/campaign_session.sh benchmarks/plans/dogfood-3.sh OUT   # then --attach OUT
# (30 minutes of device time a session: 12-06 08:38 spent 36 s starting the machine and 1450 s in
# the lane, whose last validate may start with 330 s left and run 400.)
# Per campaign: init, prepare, the machine's ceilings once (`calibrate --peaks`, which analyze places
# each shape under), baseline (the A/A floor) and `analyze --ncu` (the profile note on the baseline
# commit: where the time goes, the share of the limit, the bound). Then one heat of the candidate
# branches (cand/*, each one commit on main whose hypothesis names the bound the profile showed; kept
# as benchmarks/plans/dogfood-3/NAME.patch) and the report with the next three hypotheses. In order
# of the families' distance from their targets, so that a budget spent early cuts the last ones.
# The acceptance suite is the kernels' tests: the project's whole suite does not pass in a campaign's
# tree (its campaign folder holds the frozen harness that main keeps only in the bundle) nor on the
# lent machine (no editor, no submitit, no nvdisasm where its tests look), 6 minutes to learn that.
# The first session of this plan (12-06 05:01, docs/benchmarks/2026-12-06-0501-dogfood-3.md) kept
# fp8-blockwise-5 (profiled baseline, a heat of the two blockwise candidates, no report) and
# gemm-bf16-3 (profiled baseline), both with the whole suite as their acceptance command. The second
# (12-06 08:38, docs/benchmarks/2026-12-06-0838-dogfood-3-second-session.md) reported fp8-blockwise-6
# (cand/bw-dualquant-a accepted, merged on main) and grouped-bf16-5 (nothing accepted); its lane's
# budget ran out in gemm-bf16-4's baseline, which is not kept: the next session starts it anew.
# The third (12-06 10:35, docs/benchmarks/2026-12-06-1035-dogfood-3-third-session.md) reported
# gemm-bf16-4 and quant-tw-2 (nothing accepted), ran the graph tests and the fp8 vendor table; the
# fp8 tensorwise and rowwise families come next, profiled first: their candidates follow from what
# the profiles show (their o step read the host, 1.0-1.2 ms a call, on that session's machines).
# The fourth (12-06 12:31, docs/benchmarks/2026-12-06-1230-dogfood-3-fourth-session.md) ran the fp8
# host profile and profiled both baselines on one machine, then (the candidates written from those
# profiles, main at 6c43eca) heated and reported fp8-tensorwise-4 and fp8-rowwise-4 on another
# (nothing accepted). Every family of the plan is now reported; dogfood-3-rounds.sh profiles the
# two rejected rounds.

# Each step runs only where the campaign still needs it (`stage`), so the plan runs again as it is in
# the next session: the campaigns the last one kept are imported and go on where they stopped. A
# campaign goes on only on the GPU model of its baseline (validate refuses another: its noise floor
# is that card's); on the other kind its heat stops there, and the lane goes on with the next family.
start() {  # start NAME OP SHAPES METRIC: a campaign through its profiled baseline
  local stage
  stage=$(stage "$1")
  if [[ $stage == init ]]; then
    git checkout -q main || return  # each campaign from main, not from the one before it
    gc init "$1" --op "$2" --shapes "$3" --metric "$4" --target efficiency=0.95 --pairs 2 \
      --acceptance-command "python -m pytest -q tests/kernels" || return
    stage=baseline
  fi
  [[ $stage == baseline || $stage == analyze ]] || return 0
  gc -c "$1" prepare --no-hooks || return
  # The machine's ceilings, once: the first campaign's environment note serves every later one.
  [[ -n ${peaks_done:-} ]] || { gc -c "$1" calibrate --peaks && peaks_done=1; }
  if [[ $stage == baseline ]]; then
    gc -c "$1" baseline || return
  fi
  gc -c "$1" analyze --ncu
}

heat() {  # heat NAME BRANCH...: each candidate branch a round of one heat, decided by one validate
  local name=$1 ref stage
  shift
  stage=$(stage "$name")
  if [[ $stage == heat ]]; then
    for ref in "$@"; do
      gc -c "$name" round --heat --from "xfer/$ref" || return
    done
    stage=validate
  fi
  [[ $stage == validate ]] || return 0
  gc -c "$name" validate --heat
}

report() {  # report NAME HYPOTHESIS...: the report (one pair: the heat measured the rounds), its next rounds
  local name=$1 next=() text
  shift
  [[ $(stage "$name") == report ]] || return 0
  for text in "$@"; do
    next+=(--next "$text")
  done
  gc -c "$name" report --force --pairs 1 "${next[@]}"
}

gemm_next=(  # gemm-bf16-4's next rounds (its report; dogfood-3-reprofile.sh reports again)
  "compute: o's 1024 tiles of 128x256 fill 7.76 waves of 132 SMs, so a quarter of the last wave idles; splitting only the last wave's tiles two ways along K (data-parallel before it) fills it"
  "compute: a Gluon kernel warp-specialised by hand, two consumer warpgroups in ping-pong so that one's epilogue runs under the other's wgmma, as cuBLAS's sm90 kernels do (Triton's automatic specialisation picked no such tile)"
  "memory: 2-CTA clusters that multicast the shared operand tile by TMA halve the L2-to-SM bytes a flop on 128x256 tiles"
)
quant_next=(  # quant-tw-2's
  "memory: tensorwise reads x twice (the maxima, then the codes), 5 bytes an element against the 3 of a copy: its bound is 3/5 of a copy unless L2 keeps the input between the passes; a scale from the previous step (delayed scaling, the amax of this step kept for the next) makes it one pass, at the cost of a scale one step old"
  "memory: the quantising pass rereads x in reverse so that the amax pass's last tiles are L2 hits; an amax pass that keeps its last ~40 MB with evict_last and the rest with evict_first would leave L2 to exactly the tiles read again"
  "launch: two launches and a pass of their own for the maxima; the maxima can come from the producing op's epilogue (the norm or the GEMM before it), leaving one pass and one launch"
)
tensorwise_next=(  # fp8-tensorwise-4's next rounds, from its profile (12-06 12:35, H100)
  "compute: the fp8 GEMM runs at SM 85-91% and 12% occupancy (one 256-thread CTA, 229 KB of shared memory a SM), its warps stalled first at barriers; qkv's forward product reads 0.89 of the fp8 peak at its clock. A kernel warp-specialised by hand (Gluon: a TMA producer warp and two consumer warpgroups in ping-pong, one's epilogue under the other's wgmma), as cuBLAS's sm90 fp8 kernels are, takes the barrier wait off the tensor cores"
  "memory: the forward quantises the weight afresh every step, an amax pass and a quantise pass over 32-235 MB of bf16 that the optimizer step has just written (b's share of the bytes the forward quantises: 1/3 on o and down, 0.43 on qkv, 0.79 on gate_up); the optimizer's update can emit the new weight's maximum, or its codes in both layouts, leaving the forward to quantise a alone"
  "memory: each operand is read twice (the maxima, then the codes, written in both layouts), 6 bytes an element where one pass moves 4: a scale from the step before (delayed scaling, this step's maximum kept for the next) makes each quantisation one pass, ~1/3 less of the quantisers' 16-24% of the step, at the cost of a scale one step old"
)
rowwise_next=(  # fp8-rowwise-4's
  "memory: gate_up's backward reads dOut (470 MB) four times over: the rowwise pass (twice, the second mostly from L2), the column maxima, then dOut.T's codes from them: 923 us of quantisers in a 3729 us backward. A dual quantiser, as fp8-blockwise-6 accepted for the blockwise recipe (the row and column maxima in one read, both layouts' codes in a second), reads it twice"
  "compute: qkv's forward product takes 336.6 us where the tensorwise recipe's takes 306.4 us on the same shapes (192 registers a thread against 160): the epilogue's per-row and per-column scales; applying them from a shared-memory copy loaded once a tile (TMA) instead of per-thread global loads frees the registers that the 128x256 tile needs for its second consumer"
  "memory: the backward's quantisers of a.T, b.T and dOut.T (_row_quant_partials, DRAM 68-78%, SM 31%) read 64-byte runs of the operands' rows; a second pass of the forward over a and b as they lie can write a.T's and b.T's column-scaled codes from the maxima its first pass folds (the same 3 bytes an element, at the copy rate rather than ~0.7 of it), leaving the backward dOut's quantisation alone, at the cost of keeping those codes from forward to backward instead of the maxima"
)

lane0() {
  # fp8-blockwise-5's heat again, on today's main (the probe judged by each side's fastest run; the
  # TMA scratch fix) and with the kernels' tests as the acceptance suite.
  start fp8-blockwise-6 gemm_fp8_blockwise llama3.1-8b:mbs=1 step &&
    heat fp8-blockwise-6 cand/bw-dualquant cand/bw-dualquant-a
  report fp8-blockwise-6 \
    "compute: the Gluon GEMM runs at 65-66% SM throughput, 23% occupancy, its warps stalled first at barriers (ncu, fp8-blockwise-5): each consumer waits for its whole 64x128x128 product before promoting it; issuing it as two 64x64 wgmma and promoting the first half while the second runs overlaps each consumer's FFMA with its own tensor-core work (a fourth consumer does not fit: 4 x 128 threads x >= 128 registers of accumulator and product exceed the 64K registers a SM)" \
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
  report gemm-bf16-4 "${gemm_next[@]}"
  start quant-tw-2 quantize_fp8_tensorwise llama3.1-8b-quant:mbs=1 gbs &&
    heat quant-tw-2 cand/quant-amax-tuned
  report quant-tw-2 "${quant_next[@]}"
  # (The CUDA-graph tests and `best_vendor.py --op fp8` on main ran here on 12-06 10:46-10:50, and
  # benchmarks/dev/fp8_host_profile_dev.py on 12-06 12:32, before the two campaigns below.)
  start fp8-tensorwise-4 gemm_fp8_tensorwise llama3.1-8b:mbs=1 step &&
    heat fp8-tensorwise-4 cand/tw-pair
  report fp8-tensorwise-4 "${tensorwise_next[@]}"
  start fp8-rowwise-4 gemm_fp8_rowwise llama3.1-8b:mbs=1 step &&
    heat fp8-rowwise-4 cand/rw-colmax-rows
  report fp8-rowwise-4 "${rowwise_next[@]}"
}
