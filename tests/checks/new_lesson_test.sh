#!/usr/bin/env bash
# tests/checks/new_lesson_test.sh (make test-new-lesson, in make test): in a copy of the tree, `make -n`
# writes nothing, and `make new-lesson` writes a lesson that works with no other file edited: its starter is what its solution
# makes, the structure check passes, `make lesson99` builds it from its descriptor, the solution
# passes the CPU emulator and the starter says "not implemented" there, and the site (where pandoc
# is found) has its page. Exit 0, or 1 naming the step that failed.
set -uo pipefail
root=$(pwd)
mkdir -p build && tmp=$(mktemp -d "$root/build/new-lesson.XXXXXX") && trap 'rm -rf "$tmp"' EXIT
if git rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$tmp"
else
    tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C "$tmp"
fi
cd "$tmp" || exit 1
step() { local what=$1; shift; out=$("$@" 2>&1); rc=$?; }
fail() { echo "$out" | tail -n 30; echo "test-new-lesson: $1"; exit 1; }
# first, in the fresh copy: make -n writes nothing (no stamp, no shim, no build/ at all)
step dry make --no-print-directory -n all test grade results
[ ! -e build ] || { out=$(find build | head); fail "make -n wrote files: $(echo $out)"; }
# the emulator's runner objects, already built (make test-new-lesson depends on them)
for d in build/host build/hostsim; do [ -d "$root/$d" ] && mkdir -p "$d" && cp -p "$root/$d"/*.o "$d/" 2>/dev/null; done
step new make --no-print-directory new-lesson NUM=99 NAME=scaffold-check TITLE="a scaffolded lesson"
[ $rc = 0 ] || fail "make new-lesson failed"
step starters python3 reference/tools/starters.py --check
[ $rc = 0 ] || fail "the new starter is not what its solution makes"
step structure python3 tests/checks/check_structure.py
[ $rc = 0 ] || fail "the structure check fails on the new lesson"
step table python3 -c 'import sys; sys.path.insert(0, "tests/docs"); import check_texts as c; e = c.lesson_table_problems("."); print("\n".join(e)); sys.exit(1 if e else 0)'
[ $rc = 0 ] || fail "README.md's lesson table is not the lessons after make new-lesson"
step build make --no-print-directory -n lesson99 solution99
{ [ $rc = 0 ] && grep -q 'lessons/99-scaffold-check/scaffold_check.cu' <<<"$out" && grep -q 'solutions/99-scaffold-check/scaffold_check.cu' <<<"$out"; } ||
    fail "make lesson99 / solution99 do not build the new lesson's files"
if [ -f "${CUDA_INC:-/nonexistent}/cuda_runtime_api.h" ]; then
    step emu make --no-print-directory emu-solution99 EMU_OBJS_BUILT=1
    { [ $rc = 0 ] && grep -q 'solution99 on the CPU emulator: 3 of 3 cases passed (PASS)' <<<"$out"; } ||
        fail "the new lesson's solution does not pass make emu-solution99"
    step emu make --no-print-directory emu-lesson99 EMU_OBJS_BUILT=1 EMU_OPT=-O0
    { [ $rc != 0 ] && grep -q '^NOT IMPLEMENTED' <<<"$out"; } || fail "make emu-lesson99 does not say the starter is not implemented"
    emu="solution passes the CPU emulator, the starter is not implemented there"
else
    emu="emulator SKIP (no CUDA headers)"
fi
if command -v pandoc >/dev/null 2>&1; then
    step site env DOCS_ONLY=99-scaffold-check bash docs/build.sh "$tmp/site"
    { [ $rc = 0 ] && grep -q 'a scaffolded lesson' "$tmp/site/99-scaffold-check.html" 2>/dev/null; } || fail "the site has no page for the new lesson"
    site="the site has its page"
else
    site="site SKIP (no pandoc)"
fi
echo "test-new-lesson: make -n writes nothing; make new-lesson writes lesson 99: its starter is generated, the structure check passes, README.md has its row, make builds it; $emu; $site"
