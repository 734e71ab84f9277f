#!/bin/sh
# The long fuzzing run: EXAMPLES generated kernels (semantic fuzzer, both strategies each)
# and EXAMPLES random edits (mutation fuzzer).  Derandomized like CI, so a run is
# reproducible; a larger EXAMPLES explores further.  Figures go in docs/robustness.md.
#   scripts/fuzz_long.sh [EXAMPLES]        (default 5000)
set -eu
cd "$(dirname "$0")/.."
export TRITON_INTERPRET=1 CASTPILE_FUZZ_EXAMPLES="${1:-5000}"
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=3 -o addopts="" \
    tests/test_fuzz_semantics.py tests/test_fuzz_mutation.py -k "generated or random_edits"
