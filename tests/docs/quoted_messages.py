"""quoted_messages.py: (h) of check_texts.py. A lesson text that quotes the grader must quote what
the grader prints: every `code span` in the first cell of a table row of lessons/NN-*/README.md (the
"the grader says | likely cause" tables) that reads as a message must occur in the sources that print
messages (reference/, tests/, the lessons' and solutions' code, the Makefile and mk/).

How a quote is matched: it is cut at "..." (an elision) and each piece of 16 characters or more with
two words in it is looked for on its own. Numbers, inf and nan in the quote, and printf conversions
(%d, %.3g, %s) in the sources, all count as one placeholder; a word of the quote may stand where the
sources have a placeholder (`dQ is the reference` matches "%s is the reference"), and a placeholder
may follow a word (`causal:` matches "causal%s:"). C string literals split over lines are joined
first. A "hint: " or "diagnosis: " label at a piece's start is left out (the runners print the label
apart from the text). A tree without reference/harness (a fixture) has nothing to check."""
import glob
import os
import re

SOURCES = ["reference/**/*.c", "reference/**/*.cu", "reference/**/*.h", "reference/**/*.py",
           "reference/**/*.sh", "tests/**/*.c", "tests/**/*.cu", "tests/**/*.cpp", "tests/**/*.h",
           "tests/**/*.py", "tests/**/*.sh", "lessons/*/*.c", "lessons/*/*.cu", "lessons/*/*.h",
           "solutions/*/*.cu", "solutions/*/*.h", "mk/*.mk", "Makefile", "bench/*.py", "bench/*.sh"]
CONVERSION = re.compile(r"%[-+ #0-9.*]*(?:ll|l|z|h)?[diouxXeEfgGsc]")
SPECIAL = re.compile(r"-?\b(?:inf|nan|NaN|Inf)\b")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
ROW_FIRST_CELL = re.compile(r"^\|(.*?)\|", re.M)


def normalize(s):
    """Placeholders (#) for printf conversions, numbers, inf and nan."""
    return NUMBER.sub("#", SPECIAL.sub("#", CONVERSION.sub("#", s)))


def sources_text(root):
    text = []
    for pattern in SOURCES:
        for path in glob.glob(os.path.join(root, pattern), recursive=True):
            if os.path.isfile(path):
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text.append(fh.read())
    joined = "\n".join(text)
    joined = re.sub(r'"\s*\n\s*(?://[^\n]*\n\s*)*"', "", joined)  # "a "\n "b" -> "ab"
    joined = re.sub(r'"\s+"', "", joined)
    return normalize(joined.replace('\\"', '"'))


def pieces(quote):
    for piece in re.split(r"\.\.\.|\u2026", quote):
        piece = re.sub(r"^(?:hint|diagnosis): ", "", piece.strip(" ,;:()"))
        if len(piece) >= 16 and re.search(r"[a-z]{3,} [a-z]{2,}", piece):
            yield piece


def pattern_of(piece):
    out = []
    for tok in re.split(r"(\w+)", normalize(piece)):
        if not tok:
            continue
        if tok == "#":
            out.append(r"(?:#|\S+)")
        elif re.fullmatch(r"\w+", tok):
            out.append(r"(?:%s|#)#?" % re.escape(tok))
        else:
            out.append(re.escape(tok))
    return re.compile("".join(out))


def problems(root):
    if not os.path.isdir(os.path.join(root, "reference", "harness")):
        return []
    src = sources_text(root)
    found = []
    for md in sorted(glob.glob(os.path.join(root, "lessons", "[0-9][0-9]-*", "README.md"))):
        with open(md, encoding="utf-8") as fh:
            text = fh.read()
        for row in ROW_FIRST_CELL.finditer(text):
            line = text.count("\n", 0, row.start()) + 1
            for quote in re.findall(r"`([^`]+)`", row.group(1)):
                for piece in pieces(quote):
                    if not pattern_of(piece).search(src):
                        found.append("%s:%d: the quoted message '%s' is printed nowhere in the sources (quote "
                                     "what the grader prints, '...' where you leave words out)"
                                     % (os.path.relpath(md, root), line, piece))
    return found
