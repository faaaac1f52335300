#!/usr/bin/env python3
"""Fails when non-test code decides by the text of an error or a note (issue 37, item 6).

An upgrade that rewords a library's message must not turn an auth failure into "unreachable",
so decisions are made on types: a `BackendError` variant, an error kind, an AMQP condition, a
gRPC code, a typed source in the error chain. This scans crates/*/src and src/ (test modules,
`*_tests.rs` and `tests/` left out) for the shapes such a decision takes:

  - `.to_string().contains(` / `starts_with(` / `ends_with(`, on anything;
  - the Debug text of a value, `format!("{e:?}")…contains(`;
  - a gRPC or library `.message().contains(`;
  - an error, note or message variable tested for a literal (`e.contains("…")`,
    `note.starts_with("error")`, `msg.ends_with("timed out")`), lower-cased or not;
  - a `BackendError`/`CliError` variant's text in a match guard (`Unreachable(m) if m.…`).

ALLOWED lists the few places where the text *is* the protocol (no typed form exists), each
with its reason. Usage: scripts/check_text_decisions.py (exit 1 on a finding).
"""

import os
import re
import sys

ROOTS = ["crates", "src"]

PATTERNS = [
    r"\.to_string\(\)\s*\.\s*(contains|starts_with|ends_with)\(",
    r'format!\("\{[^"]*:\?\}"[^;]*\)\s*\.\s*(contains|starts_with|ends_with)\(',
    r"\.message\(\)\s*\.\s*(to_ascii_lowercase\(\)\.|to_lowercase\(\)\.)?(contains|starts_with|ends_with)\(",
    r"\b(e|err|error|note|notes|msg|m|text|why|detail|stderr)\s*\.\s*"
    r'(to_ascii_lowercase\(\)\.|to_lowercase\(\)\.)?(contains|starts_with|ends_with|find)\(\s*"',
    r'\blower\s*\.\s*contains\(\s*"',
    r"(BackendError|CliError)::\w+\s*\(\s*\w+\s*\)\s*if\s+\w+\s*\.\s*(contains|starts_with|ends_with|find)\(",
]

# (path, a piece of the line): why the text is the protocol itself.
ALLOWED = {
    (
        "crates/qdeck-backend/src/servicebus/http.rs",
        'text.find("<Detail>")',
    ): "Service Bus's REST error body is XML whose <Detail> element holds the broker's own "
    "message; this cuts it out to show it, the kind comes from the HTTP status",
    (
        "crates/qdeck-backend/src/net_error.rs",
        'text.contains("dns error")',
    ): "hyper-util names a DNS failure only in its message (its ConnectError is private and "
    "the OS error under it is uncategorised); it picks the words shown, the kind stays "
    "reqwest's is_connect()",
    (
        "crates/qdeck-backend/src/servicebus/entra/azure_cli.rs",
        'stderr.to_ascii_lowercase().contains("az login")',
    ): "the Azure CLI's stderr is its only interface: a signed-out CLI says `az login` and "
    "nothing typed; the error is Auth either way, this picks the advice",
}


def non_test_lines(path):
    """(number, line) of the file outside `#[cfg(test)]` items."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if re.match(r"\s*#\[cfg\(test\)\]", lines[i]):
            j = i + 1
            while j < len(lines) and re.match(r"\s*#\[", lines[j]):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith(";"):
                i = j + 1  # `mod tests;` in a file of its own, left out below
                continue
            depth, started = 0, False
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                started = started or "{" in lines[j]
                j += 1
                if started and depth <= 0:
                    break
            i = j
            continue
        out.append((i + 1, lines[i]))
        i += 1
    return out


def is_test_file(path):
    name = os.path.basename(path)
    parts = path.split(os.sep)
    return name.endswith("_tests.rs") or name == "tests.rs" or "tests" in parts[:-1]


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    regexes = [re.compile(p) for p in PATTERNS]
    found, used = [], set()
    for root in ROOTS:
        for d, _, files in os.walk(root):
            for f in sorted(files):
                path = os.path.join(d, f)
                if not f.endswith(".rs") or is_test_file(path):
                    continue
                for n, line in non_test_lines(path):
                    code = line.split("//")[0] if not line.strip().startswith("//") else ""
                    if not any(r.search(code) for r in regexes):
                        continue
                    allowed = [k for k in ALLOWED if k[0] == path and k[1] in code]
                    if allowed:
                        used.update(allowed)
                        continue
                    found.append(f"{path}:{n}: {line.strip()}")
    for k in ALLOWED:
        if k not in used:
            found.append(f"{k[0]}: allow-list entry no longer matches: {k[1]}")
    if found:
        print("TEXT DECISION: decide by type (variant, kind, code), not by an error's text:",
              file=sys.stderr)
        for line in found:
            print("  " + line, file=sys.stderr)
        return 1
    print(f"check_text_decisions: ok ({len(ALLOWED)} allowed, each the broker's or tool's "
          "own protocol)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
