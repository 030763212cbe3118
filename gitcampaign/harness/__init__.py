"""The quick harness as a package: the campaign's judge, one module per concern.

    contract   what the harness and the tool agree on (op spec declarations, shapes, CSV); stdlib only
    routing    the MoE routing the grouped ops are measured on
    inputs     banks and the `draw` an op spec draws its inputs with
    checks     SNR, bit-level and tolerance rules, poisoning, the identity flip, the seal
    clock      back-to-back timing at the sustained clock, the clock record, the warm-up
    spec       an op spec, loaded and bound to its kernel
    runner     one shape: warm-up, timing, checks, the CSV row
    probe      the training probe built from the spec's parameters and activations
    profile    the per-kernel profile behind `git campaign analyze`
    main       the entry point
    ops/       the shipped ops' specs (the registry)
    build      the frozen single file `prepare` writes into a campaign

Importing this package costs nothing: the tool reads only `contract` (standard library) and the
registry; torch is imported inside the functions that measure.
"""
