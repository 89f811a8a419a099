"""Benchmark harness: tilegraph against PyTorch eager, torch.compile, numpy and TVM MetaSchedule.

    python -m benchmarks.run ansor-cpu --budget 60 --threads 1,2
    python -m benchmarks.run transformer-gemm resnet50-conv --short
    python -m benchmarks.run models [--short]               # whole models (benchmarks/models.py)
    python -m benchmarks.run precision [--only bert]        # bf16 models vs ORT and OpenVINO (precision.py)

Modules: suites (what is measured), protocol (how it is timed), peers/ (the other systems),
tilegraph_system (tilegraph itself), report (Markdown, CSV, PNG), run (the command line).
This package imports nothing heavy at import time so `run` can size thread pools first.
"""

SUITES = ("ansor-cpu", "transformer-gemm", "resnet50-conv")  # here, so parsing arguments loads no numpy
