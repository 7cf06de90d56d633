#!/usr/bin/env bash
# The results fingerprint (reference/tools/source_hash.py) must follow the code and only the code: a
# reworded comment or re-indented line keeps it (no GPU rerun asked for), a changed token, string,
# preprocessor line, included reference/include header or the source such a header names as its
# implementation changes it. make test runs this.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/reference/include" "$tmp/reference/tools" "$tmp/solutions/99-x"
cp "$here/reference/tools/source_hash.py" "$tmp/reference/tools/"
printf '#pragma once\n#define TILE 64  // the tile\n' > "$tmp/reference/include/hdr.h"
src="$tmp/solutions/99-x/k.cu"
write() { printf '%s\n' '#include "hdr.h"' "$@" > "$src"; }
fp() { python3 "$tmp/reference/tools/source_hash.py" "$src"; }
write '/* kernel */' 'int f(int a) { return a / 2; }  // half' 'const char *s = "a // b";'
base=$(fp)
fail=0
same() { [ "$(fp)" = "$base" ] || { echo "source_hash selftest: $1 changed the fingerprint"; fail=1; }; }
differ() { [ "$(fp)" != "$base" ] || { echo "source_hash selftest: $1 kept the fingerprint"; fail=1; }; }
write '/* the kernel, reworded */' 'int f(int a) {' '    return a / 2;   // a half' '}' 'const char *s = "a // b";'
same "a comment and indentation change"
write '/* kernel */' 'int f(int a) { return a / 3; }  // half' 'const char *s = "a // b";'
differ "a changed constant"
write '/* kernel */' 'int f(int a) { return a / 2; }  // half' 'const char *s = "a /* b";'
differ "a changed string"
write '/* kernel */' 'int f(int a) { return a / 2; }  // half' 'const char *s = "a // b";'
printf '#pragma once\n#define TILE 128  // the tile\n' > "$tmp/reference/include/hdr.h"
differ "a changed included header"
printf '#pragma once\n#define TILE 64  // the tile\n' > "$tmp/reference/include/hdr.h"
mkdir -p "$tmp/solutions/98-y"; printf 'int g(int b) { return b; }\n' > "$tmp/solutions/98-y/other.cu"
write '#include "../98-y/other.cu"' '/* kernel */' 'int f(int a) { return a / 2; }  // half' 'const char *s = "a // b";'
base=$(fp)
printf 'int g(int b) { return b + 1; }\n' > "$tmp/solutions/98-y/other.cu"
differ "a changed file included by its path (another lesson's solution)"
mkdir -p "$tmp/solutions/97-z"; printf 'int h(int c) { return c; }\n' > "$tmp/solutions/97-z/impl.cu"
printf '#pragma once\n/* [implemented in solutions/97-z/impl.cu] */\nint h(int c);\n' > "$tmp/reference/include/api.h"
write '#include "api.h"' '/* kernel */' 'int f(int a) { return h(a) / 2; }'
base=$(fp)
printf 'int h(int c) { return c + 1; }\n' > "$tmp/solutions/97-z/impl.cu"
differ "a changed source that an included header names as its implementation"
[ $fail = 0 ] && echo "source_hash selftest: comments and spacing ignored; code, strings, headers, included files and implementations counted"
exit $fail
