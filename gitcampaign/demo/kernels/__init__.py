"""Pure-Triton kernels that gitcampaign optimises; `torch` backends are the vendor references."""
