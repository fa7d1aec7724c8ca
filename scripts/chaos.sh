#!/usr/bin/env bash
# Runs the long forms of Sluice's reliability suite (issue 16; docs/RELIABILITY.md): the tests
# read SLUICE_CHAOS=1 and scale their keys, rounds and durations (each still bounded), then
# every fuzz target runs for minutes. It starts the same real servers as scripts/test.sh (its
# only implementation), stops every process it started by PID, and exits non-zero on failure.
#
# Usage: scripts/chaos.sh                      (from the repository root; ~25 min on 2 cores: the soak alone is 10 min)
#        SLUICE_FUZZTIME=10m scripts/chaos.sh  longer fuzzing per target (default 2m)
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE_CHAOS=1 exec scripts/test.sh
