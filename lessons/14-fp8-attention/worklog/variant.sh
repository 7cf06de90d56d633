#!/usr/bin/env bash
# lessons/14-fp8-attention/worklog/variant.sh SRC OUT [NAME...]: lesson 14's source SRC (the solution, or
# your lessons/14-fp8-attention/fp8_attention.cu) with the variants NAME applied in order, written
# to OUT. Variant NAME is lessons/14-fp8-attention/worklog/variants/NAME.var: an alternative to measure (see
# worklog/README.md), e.g. V transposed inside the kernel. The program is lesson 09's variant.sh (the
# format, the checks and the exit statuses are described there), run on this lesson's variants.
# `make solution14-NAME`, `make emu-14 EMU14_VARIANTS=NAME` and check-14 call it.
here=$(cd "$(dirname "$0")" && pwd)
VARIANT_DIR="$here/variants" exec bash "$here/../../09-hopper-wgmma/worklog/variant.sh" "$@"
