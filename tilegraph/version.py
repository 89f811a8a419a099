"""Versions that key stored artefacts: the package's, and the generated code's.

CODEGEN_VERSION is bumped whenever generated code changes for the same lowered IR; it is part of
`Target.fingerprint` (tuning records) and of the build cache key, so neither serves stale code.
It lives here, below every layer, because the Target (bottom layer) hashes it.
"""

__version__ = "0.1.0"
CODEGEN_VERSION = "2"
