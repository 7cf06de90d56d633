#!/usr/bin/env python3
"""fence_bodies.py [--fix] FILE...: the one-line body of every include fence in lesson texts.

An include fence shows code from a real file on the course site (docs/filters/include.lua
replaces its body). GitHub does not run the filter, so there the body is all a reader sees:
one line naming the file and region, written as a comment of the fence's language:

    ```{.cuda include="solutions/12-flash-decoding/flash_decoding.cu" region="merge"}
    // solutions/12-flash-decoding/flash_decoding.cu, region "merge" (shown on the course site)
    ```

A body is accepted when it is exactly one non-blank line that contains the include path and,
for a fence with a region, the text `region "NAME"` (without a region: no `region "` at all).
include.lua applies the same rule and stops the site build on a fence that breaks it.

Without --fix: print FILE:LINE and what is wrong for each fence that breaks the rule; exit 1
if there is one. With --fix: rewrite each such body to the canonical line above (the comment
marker from the fence's class, else from the file's extension) and print FILE:LINE for each
change; exit 1 only for a fence it cannot fix (one that is never closed). Idempotent.
Only the Python standard library is used; tests/docs/check_texts.py imports this module.
"""
import re
import sys

FENCE_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
ATTR = r"""(?:^|[\s{])%s=(?:"([^"]*)"|'([^']*)'|([^\s}]+))"""

# Comment marker of a language (a fence's first class, or a file extension).
COMMENT = {
    "c": "//", "h": "//", "cuda": "//", "cu": "//", "cuh": "//", "cpp": "//", "hpp": "//",
    "cc": "//", "js": "//", "bash": "#", "sh": "#", "shell": "#", "python": "#", "py": "#",
    "makefile": "#", "mk": "#", "make": "#", "yaml": "#", "toml": "#", "lua": "--",
}


def attr(info, name):
    m = re.search(ATTR % re.escape(name), info)
    if not m:
        return None
    return next(g for g in m.groups() if g is not None)


def fences(text):
    """Every fenced code block of a Markdown text, in order, as dicts: start (1-based line of
    the opening fence), end (line of the closing fence, None if never closed), indent, info,
    body (list of lines), include, region (None when absent)."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m or (m.group(2)[0] == "`" and "`" in m.group(3)):
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        close = re.compile(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence))
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        region = attr(info, "region")
        out.append({"start": i + 1, "end": j + 1 if j < len(lines) else None, "indent": indent,
                    "info": info, "body": lines[i + 1:j], "include": attr(info, "include"),
                    "region": region if region else None})
        i = j + 1
    return out


def include_fences(text):
    return [f for f in fences(text) if f["include"]]


def canonical(f):
    """The body line of an include fence, e.g. '// solutions/x/y.cu, region "r" (shown on the course site)'."""
    cls = re.search(r"(?:^|[\s{])\.([\w+-]+)", f["info"])
    ext = re.search(r"\.(\w+)$", f["include"])
    base = f["include"].rsplit("/", 1)[-1]
    lang = (cls.group(1).lower() if cls else None) or (ext.group(1).lower() if ext else None)
    if lang not in COMMENT and base == "Makefile":
        lang = "makefile"
    mark = COMMENT.get(lang, "//")
    where = f["include"] + (f', region "{f["region"]}"' if f["region"] else "")
    return f"{mark} {where} (shown on the course site)"


def body_problem(f):
    """What is wrong with an include fence's body, or None."""
    if f["end"] is None:
        return "the fence is never closed"
    lines = [l for l in f["body"] if l.strip()]
    if not lines:
        return "empty body (it must be one line naming the file and region)"
    if len(lines) > 1 or len(f["body"]) != 1:
        return f"{len(f['body'])} body lines (it must be exactly one line naming the file and region)"
    line = lines[0]
    if f["include"] not in line:
        return f"the body does not name the file {f['include']}: {line.strip()!r}"
    if f["region"] and f'region "{f["region"]}"' not in line:
        return f"the body does not name the region \"{f['region']}\": {line.strip()!r}"
    if not f["region"] and 'region "' in line:
        return f"the body names a region but the fence includes the whole file: {line.strip()!r}"
    return None


def fix(text):
    """(new text, [(line in the new text, old body, new body)], [(line, problem it cannot fix)])"""
    lines = text.split("\n")
    changes, errors = [], []
    for f in reversed(include_fences(text)):
        problem = body_problem(f)
        if problem is None:
            continue
        if f["end"] is None:
            errors.append((f["start"], problem))
            continue
        new = f["indent"] + canonical(f)
        lines[f["start"]:f["end"] - 1] = [new]
        changes.append((f["start"], f["body"], new))
    # Report lines of the new text: each earlier change moved the lines after it.
    shift, moved = 0, []
    for line, old, new in changes[::-1]:
        moved.append((line + shift, old, new))
        shift += 1 - len(old)
    return "\n".join(lines), moved, errors[::-1]


def main(argv):
    do_fix = "--fix" in argv
    files = [a for a in argv if a != "--fix"]
    if not files or any(a.startswith("-") for a in files):
        sys.exit(__doc__)
    status = 0
    for path in files:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        if do_fix:
            new, changes, errors = fix(text)
            if changes:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(new)
            for line, old, body in changes:
                print(f"{path}:{line}: body {'set' if not any(l.strip() for l in old) else 'corrected'}: {body.strip()}")
            for line, problem in errors:
                print(f"{path}:{line}: cannot fix: {problem}")
                status = 1
        else:
            for f in include_fences(text):
                problem = body_problem(f)
                if problem:
                    print(f"{path}:{f['start']}: include fence {f['include']}"
                          f"{' region ' + f['region'] if f['region'] else ''}: {problem}")
                    status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
