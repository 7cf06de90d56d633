#!/usr/bin/env bash
# lessons/13-hopper-backward/worklog/variant.sh SRC OUT [NAME...]: lesson 13's source SRC (the solution, or
# your lessons/13-hopper-backward/hopper_backward.cu) with the variants NAME applied in order,
# written to OUT. Variant NAME is lessons/13-hopper-backward/worklog/variants/NAME.var: a measured
# alternative (see worklog/README.md), e.g. the deterministic dQ. The program is lesson 09's variant.sh
# (the format, the checks and the exit statuses are described there), run on this lesson's
# variants. `make solution13-NAME`, `make emu-13 EMU13_VARIANTS=NAME`, check-13 and bench.sh
# call it.
here=$(cd "$(dirname "$0")" && pwd)
VARIANT_DIR="$here/variants" exec bash "$here/../../09-hopper-wgmma/worklog/variant.sh" "$@"
