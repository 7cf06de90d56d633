#!/usr/bin/env bash
# tests/mutants/cli.sh N...: the solution binaries (./solutionN, built by make) refuse bad
# command lines with exit status 2 and a message naming the option and what it accepts:
# negative, zero, huge and non-numeric values and unknown options (on one binary per kind of
# runner: they share that code), and on every binary what its lesson does not support (head
# dims, dtypes, --causal before lesson 05), checked against the list the binary itself prints.
# Runs without a GPU: the command line is checked before the GPU is touched. Values a lesson
# accepts then run one tiny shape: exit 0 on a GPU, 4 without one.
# The decode options: a forward lesson refuses them, a decode lesson checks them. The serving
# layouts' (--paged, --varlen, --seqlens): bad values refused on every kind, the options themselves
# by every lesson whose LESSON flags do not declare them.
# With a GPU it also asks for a shape far beyond device memory: that must be exit 7 (OOM).
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0; gaps=0
have_gpu=0; nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
# a run that reaches the GPU gets a time limit; without one the binary stops at the device query
limit=(); [ $have_gpu = 1 ] && limit=(timeout 300)

ok()   { pass=$((pass + 1)); }
bad()  { fail=$((fail + 1)); echo "FAIL  $*"; }

# refused BIN "EXPECTED TEXT" ARGS...: exit status 2 and the text on stderr/stdout
refused() {
    local bin=$1 want=$2; shift 2
    local out rc
    out=$("./$bin" "$@" 2>&1); rc=$?
    # bash's own matching, not grep: this runs about 900 times, and a process each costs more than the binary
    if [ $rc -eq 2 ] && [[ $out == *"$want"* ]]; then ok
    else bad "$bin $*: expected exit 2 and '$want', got exit $rc: $(head -c 200 <<<"$out")"; fi
}

# accepted BIN ARGS...: not a usage error: 0 on a GPU (a tiny shape that must pass), 4 without one
accepted() {
    local bin=$1; shift
    local out rc
    out=$("${limit[@]}" "./$bin" "$@" --check-only --timeout 30 2>&1); rc=$?
    if [ $rc -eq 0 ] || { [ $rc -eq 4 ] && [ $have_gpu = 0 ]; }; then ok
    else bad "$bin $*: expected to be accepted (exit 0, or 4 without a GPU), got exit $rc: $(tail -n 3 <<<"$out" | head -c 300)"; fi
}

# probe BIN OPTION VALUE ARGS...: prints "refused LIST" (the list from the refusal message) or "accepted"
probe() {
    local bin=$1 opt=$2 val=$3; shift 3
    local out rc
    out=$("${limit[@]}" "./$bin" "$opt" "$val" "$@" --check-only --timeout 30 2>&1); rc=$?
    if [ $rc -eq 2 ]; then
        local nl=$'\n' re
        re="$opt $val is not supported by lesson [0-9]+: expected one of ([^$nl]*)"
        if [[ $out =~ $re ]] && [ -n "${BASH_REMATCH[1]}" ]; then echo "refused ${BASH_REMATCH[1]}"; else echo "refused ?"; fi
    elif [ $rc -eq 0 ] || { [ $rc -eq 4 ] && [ $have_gpu = 0 ]; }; then echo accepted
    else echo "error $rc"; fi
}

# generic_refusals BIN N: the values no lesson accepts. They come from the command-line code every
# binary links (reference/harness/cli.c, the runner), so they are checked on one binary of each kind of
# runner among the arguments (lesson 01's CPU softmax, the forward runner, the backward one,
# decoding, the ring across GPUs); what a lesson supports (head dims, dtypes, causal) is checked
# on every binary below.
generic_refusals() {
    local bin=$1 n=$2 a v
    # values no lesson accepts
    refused $bin "unknown option" --bogus
    refused $bin "unexpected argument" stray
    refused $bin "needs a value" --seed
    refused $bin "--reps '0' is not valid: expected an integer in 1..100000" --reps 0
    refused $bin "--reps '-1' is not valid" --reps -1
    refused $bin "--seed '-1' is not valid" --seed -1
    refused $bin "--seed 'x1' is not valid" --seed x1
    refused $bin "--timeout '0' is not valid: expected seconds in 0.1..3600" --timeout 0
    refused $bin "--timeout 'abc' is not valid" --timeout abc
    refused $bin "--timeout '1e9' is not valid" --timeout 1e9
    refused $bin "--warmup '-1' is not valid" --warmup -1
    refused $bin "--logit-scale '0' is not valid: expected a factor in 1..1000" --logit-scale 0
    if [ "$n" = 1 ]; then
        # lesson 01 is one softmax row on the CPU: shape, dtype and causal options do not apply
        for a in "--seq 5" "--batch 2" "--heads 2" "--dim 64" "--causal" "--dtype fp16" "--dtype bf16" "--ranks 2" \
                 "--logit-scale 30" "--outliers" "--fuzz 3"; do
            refused $bin "do not apply" $a
        done
        refused $bin "--dtype 'fp8' is not valid: expected fp32, fp16 or bf16" --dtype fp8
        return
    fi
    for a in "--batch 0" "--batch -3" "--batch 4097" "--batch 99999999999999999999" "--batch abc" "--batch 2.5"; do
        refused $bin "${a%% *} '${a#* }' is not valid: expected an integer in 1..4096" $a
    done
    for a in "--heads 0" "--heads -1" "--heads 1025" "--heads 0x10"; do
        refused $bin "${a%% *} '${a#* }' is not valid: expected an integer in 1..1024" $a
    done
    for a in "--seq 0" "--seq -5" "--seq 1048577" "--seq 1e3" "--seq 12x" "--seq ''"; do
        v=${a#* }; [ "$v" = "''" ] && v=""
        refused $bin "--seq '$v' is not valid: expected an integer in 1..1048576" --seq "$v"
    done
    for a in "--dim 0" "--dim -64" "--dim 257" "--dim 64.0" "--dim sixty-four"; do
        refused $bin "${a%% *} '${a#* }' is not valid: expected an integer in 1..256" $a
    done
    refused $bin "--dtype 'fp8' is not valid: expected fp32, fp16 or bf16" --dtype fp8
    refused $bin "--dtype 'FP16' is not valid" --dtype FP16
    refused $bin "--fuzz '0' is not valid: expected an integer in 1..100000" --fuzz 0
    refused $bin "--fuzz '-5' is not valid" --fuzz -5
    refused $bin "--fuzz draws its own shapes" --fuzz 5 --seq 8
    refused $bin "--fuzz draws its own shapes" --fuzz 5 --bench-only
    refused $bin "exclude each other" --check-only --bench-only
    for a in "--ranks 0" "--ranks 9" "--ranks -1" "--ranks x"; do
        refused $bin "--ranks '${a#* }' is not valid: expected an integer in 1..8" $a
    done
    refused $bin "--transport 'mpi' is not valid: expected ce (the copy engines) or nccl" --transport mpi
    for a in "--ring-delay-us -1" "--ring-delay-us 1000001" "--ring-delay-us x"; do
        refused $bin "--ring-delay-us '${a#* }' is not valid: expected an integer in 0..1000000" $a
    done
    for a in "--paged 100" "--paged 4" "--paged 2048" "--paged x" "--paged -16"; do
        refused $bin "--paged '${a#* }' is not valid: expected keys per page, a power of two in 8..1024" $a
    done
    refused $bin "--varlen '0' is not valid: expected an integer in 1..1048576" --varlen 0
    refused $bin "--seqlens '12,,4' is not valid: item 2, '', is not a length in 1..1048576" --seqlens 12,,4
    refused $bin "--seqlens '5:0' is not valid: item 1, '5:0', is not LEN_Q:LEN_K" --seqlens 5:0
}
# each lesson's runner (its descriptor: cpu, forward, decode, backward; ring where transport := nccl)
declare -A KIND=()
while read -r n _ runner; do KIND[$n]=$runner; done < <(python3 reference/tools/lessons.py runner)
while read -r n _ transport; do [ -n "$transport" ] && KIND[$n]=ring; done < <(python3 reference/tools/lessons.py transport)
runner_kind() { echo "${KIND[$1]:-forward}"; }
declare -A kind_seen=()

for n in "$@"; do
    bin=solution$n
    if [ ! -x "./$bin" ]; then bad "./$bin missing (make $bin)"; continue; fi
    k=$(runner_kind "$n")
    if [ -z "${kind_seen[$k]:-}" ]; then kind_seen[$k]=$n; generic_refusals $bin $n; fi
    [ "$n" = 1 ] && continue  # lesson 01: no shapes, dtypes or causal to check
    # the serving layouts (attention.h): refused, with the valid page sizes, by a lesson whose
    # LESSON flags do not declare them
    src=$(ls solutions/"$(printf %02d "$n")"-*/*.cu 2>/dev/null | head -n1)
    grep -q LESSON_PAGED_KV "$src" ||
        refused $bin "does not read a paged KV cache (--paged PAGE_SIZE, a power of two in 8..1024)" --paged 16
    grep -q LESSON_VARLEN "$src" || refused $bin "does not take packed batches (--varlen, --seqlens)" --varlen 100
    # head dims: each is accepted, or refused with the lesson's own list, and the list is right
    dims_ok=""; dims_list=""
    for d in 16 32 48 64 80 96 128 160 192 256; do
        r=$(probe $bin --dim $d -b 1 -H 1 -n 3)
        case $r in
            accepted) dims_ok="$dims_ok${dims_ok:+, }$d" ;;
            "refused ?") bad "$bin --dim $d: exit 2 without 'is not supported by lesson NN: expected one of ...'" ;;
            refused*) dims_list=${r#refused } ;;
            *) bad "$bin --dim $d: $r" ;;
        esac
    done
    if [ -z "$dims_ok" ]; then bad "$bin accepts no head dim"
    elif [ -n "$dims_list" ] && [ "$dims_list" != "$dims_ok" ]; then
        bad "$bin: refusal lists d = $dims_list but accepts $dims_ok"
    else ok; echo "ok    $bin head dims: accepts $dims_ok, refuses the rest with that list"; fi
    d0=${dims_ok%%,*}
    # dtypes, the same way
    dt_ok=""; dt_list=""
    for t in fp32 fp16 bf16 e4m3; do
        r=$(probe $bin --dtype $t -b 1 -H 1 -n 3 -d "$d0")
        case $r in
            accepted) dt_ok="$dt_ok${dt_ok:+, }$t" ;;
            "refused ?") bad "$bin --dtype $t: exit 2 without 'is not supported by lesson NN: expected one of ...'" ;;
            refused*) dt_list=${r#refused } ;;
            *) bad "$bin --dtype $t: $r" ;;
        esac
    done
    if [ -z "$dt_ok" ]; then bad "$bin accepts no dtype"
    elif [ -n "$dt_list" ] && [ "$dt_list" != "$dt_ok" ]; then bad "$bin: refusal lists dtypes $dt_list but accepts $dt_ok"
    else ok; echo "ok    $bin dtypes: accepts $dt_ok, refuses the rest with that list"; fi
    # causal masking starts in lesson 05
    if [ "$n" -lt 5 ]; then
        refused $bin "lesson $(printf %02d "$n") does not support --causal" --causal -b 1 -H 1 -n 3 -d "$d0"
        refused $bin "does not support --causal" --causal
    else
        accepted $bin --causal -b 1 -H 1 -n 3 -d "$d0"
    fi
    accepted $bin -b 1 -H 1 -n 1 -d "$d0"
    # far beyond any GPU's memory (and the host's): must be a clear out-of-memory (exit 7)
    if [ $have_gpu = 1 ]; then
        out=$(timeout 300 "./$bin" -b 4096 -H 1024 -n 1048576 -d "$d0" --check-only 2>&1); rc=$?
        if [ $rc -eq 7 ] && grep -qi "out of memory" <<<"$out"; then ok
        else
            gaps=$((gaps + 1))
            echo "GAP   $bin -b 4096 -H 1024 -n 1048576 -d $d0: exit $rc, not 7 (out of memory): $(tail -n 2 <<<"$out" | head -c 200)"
            echo "      (the harness should compare the bytes it needs with the free device and host memory before allocating: reference/harness/runner_attention.cu, problem_init)"
        fi
    fi
done
# the decode options: refused by a forward lesson, checked by a decode one (the last of each given);
# --ranks: refused by a forward lesson, taken by the ring (no GPU: it stops at the device query)
fwd=""; dec=""; ring=""
for n in "$@"; do case $(runner_kind "$n") in forward) fwd=solution$n ;; decode) dec=solution$n ;; ring) ring=solution$n ;; esac; done
if [ -n "$fwd" ] && [ -x "./$fwd" ]; then
    refused $fwd "(flash decoding) takes them" --kv-seq 100
    refused $fwd "does not take decode shapes" --kv-heads 2 -H 4
    refused $fwd "does not take decode shapes" --ragged
    refused $fwd "does not run over ranks (--ranks): lesson 15 (ring attention) does" --ranks 2
    refused $fwd "does not move blocks between ranks (--transport, --ring-delay-us)" --transport ce
    refused $fwd "does not move blocks between ranks (--transport, --ring-delay-us)" --ring-delay-us 0
fi
if [ -n "$ring" ] && [ -x "./$ring" ]; then
    accepted $ring --ranks 3 -b 1 -H 1 -n 6 -d 64
    accepted $ring --ranks 3 --transport ce --ring-delay-us 0 -b 1 -H 1 -n 6 -d 64
fi
if [ -n "$dec" ] && [ -x "./$dec" ]; then
    refused $dec "--kv-heads 3 does not divide --heads 8" -H 8 --kv-heads 3
    refused $dec "--kv-heads 5 does not divide --heads 32" --kv-heads 5
    refused $dec "give --kv-seq >= 16" -n 16 --kv-seq 8 --causal
    refused $dec "--kv-seq '0' is not valid: expected an integer in 1..1048576" --kv-seq 0
    refused $dec "--kv-heads 'x' is not valid" --kv-heads x
    refused $dec "--fuzz draws its own shapes" --fuzz 3 --ragged
    refused $dec "--dim 96 is not supported by lesson" -d 96 --kv-seq 10
fi
echo "command line: $pass checks passed, $fail failed$([ $gaps -gt 0 ] && echo ", $gaps known gaps") (solutions $*; GPU: $([ $have_gpu = 1 ] && echo yes || echo no))"
[ $fail -eq 0 ]
