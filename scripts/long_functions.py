#!/usr/bin/env python3
"""List non-test Rust functions longer than a limit (default 120 lines).

A function runs from its `fn` line to the brace that closes its body. `#[cfg(test)]`
modules and `#[test]` functions are skipped. Usage: long_functions.py [LIMIT] [DIR...]
"""
import re
import sys
from pathlib import Path

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")


def strip(line: str) -> str:
    """The line without string/char literals and comments, for counting braces."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//", 1)[0]


def functions(path: Path):
    lines = path.read_text(errors="replace").splitlines()
    i, skip_depth, depth = 0, None, 0
    pending_test = False
    while i < len(lines):
        text = lines[i]
        code = strip(text)
        if "#[cfg(test)]" in text or "#[test]" in text or "#[tokio::test" in text:
            pending_test = True
        m = FN.match(text)
        if m and skip_depth is None and "{" in "".join(strip(l) for l in lines[i : i + 12]):
            start, d, opened, j = i, 0, False, i
            while j < len(lines):
                c = strip(lines[j])
                # A declaration ending in ';' before any body has no body.
                if not opened and ";" in c and "{" not in c:
                    break
                d += c.count("{") - c.count("}")
                opened = opened or "{" in c
                if opened and d <= 0:
                    break
                j += 1
            if opened and not pending_test:
                yield m.group(6), start + 1, j - start + 1
            pending_test = False
            i = j + 1 if opened else i + 1
            continue
        if pending_test and re.match(r"^\s*(pub\s+)?mod\s+\w+", text):
            # skip the whole test module
            d, j = 0, i
            while j < len(lines):
                c = strip(lines[j])
                d += c.count("{") - c.count("}")
                if "{" in c or d:
                    if d <= 0 and "{" in "".join(strip(l) for l in lines[i : j + 1]):
                        break
                j += 1
            pending_test = False
            i = j + 1
            continue
        if code.strip() and not code.strip().startswith("#"):
            pending_test = pending_test and code.strip().startswith(("#", "async", "fn", "pub"))
        i += 1


def main():
    args = sys.argv[1:]
    limit = int(args.pop(0)) if args and args[0].isdigit() else 120
    roots = [Path(a) for a in args] or [Path("src"), Path("crates")]
    rows = []
    for root in roots:
        for p in sorted(root.rglob("*.rs")) if root.is_dir() else []:
            for name, line, n in functions(p):
                if n > limit:
                    rows.append((n, f"{p}:{line}", name))
    for n, where, name in sorted(rows, reverse=True):
        print(f"{n:5d} {where} {name}")
    print(f"{len(rows)} function(s) over {limit} lines")


if __name__ == "__main__":
    main()
