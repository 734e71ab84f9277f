#!/bin/sh
# The long fuzzing run: EXAMPLES generated kernels (semantic fuzzer, both strategies each,
# every third also compiled for sm_90) and EXAMPLES random edits (mutation fuzzer).
# Derandomized like CI, so a run is reproducible; a larger EXAMPLES explores further.
# The semantic fuzzer uses the features CI uses (tests/fuzz_model.py FEATURES less
# tests/test_fuzz_semantics.py OPEN_FEATURES); CASTPILE_FUZZ_FEATURES=all (or a
# comma-separated list) chooses others.  Figures go in docs/robustness.md.
#   scripts/fuzz_long.sh [EXAMPLES]        (default 5000)
#   CASTPILE_FUZZ_FEATURES=all scripts/fuzz_long.sh 2000
set -eu
cd "$(dirname "$0")/.."
export TRITON_INTERPRET=1 CASTPILE_FUZZ_EXAMPLES="${1:-5000}"
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=3 -o addopts="" \
    tests/test_fuzz_semantics.py tests/test_fuzz_mutation.py -k "generated or random_edits"
