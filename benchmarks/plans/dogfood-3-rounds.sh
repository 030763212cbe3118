# A plan for benchmarks/campaign_session.sh, after dogfood-3.sh's fourth session (12-06 13:17): both
# fp8 candidates were rejected well short of their profiles' estimates (fp8-tensorwise-4's shared
# launches +0.3% on o where ~1% was expected; fp8-rowwise-4's column maxima -0.5% on down where
# +1.7% was). Profile each rejected round on the shape it was meant to move, beside its baseline's
# profile, to learn which part of the estimate failed.
#   LANE_S=300 bash benchmarks/campaign_session.sh benchmarks/plans/dogfood-3-rounds.sh OUT
source benchmarks/plans/dogfood-3.sh

lane0() {
  gc -c fp8-tensorwise-4 analyze 2 --ncu --shape llama3.1-8b-o-mbs1
  gc -c fp8-rowwise-4 analyze 2 --ncu --shape llama3.1-8b-down-mbs1
}
