"""Training: packed-data loading, the aligner, the acoustic / vocoder / emotion-judge loops, snapshots and
export to a model directory. Never imported by the runtime; `rtvox train ...` imports it on demand."""
