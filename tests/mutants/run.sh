#!/usr/bin/env bash
# tests/mutants/run.sh [cpu|gpu|all|build]: run the planted-bug mutants through the grader
# (tests/mutants/run.py does the work; README.md explains the format). Called by make
# (mk/tools.mk), which passes the compiler flags; run directly, it asks make to do that.
set -u
mode=${1:-all}
cd "$(dirname "$0")/../.."
if [ -z "${MUTANTS_FROM_MAKE:-}" ]; then
    case $mode in
        cpu) exec make --no-print-directory mutants-cpu-only ;;
        gpu) exec make --no-print-directory mutants-gpu ;;
        build) exec make --no-print-directory mutants-build ;;
        all) exec make --no-print-directory mutants ;;
        *) echo "usage: $0 [cpu|gpu|all|build]" >&2; exit 2 ;;
    esac
fi
exec python3 tests/mutants/run.py "$@"
