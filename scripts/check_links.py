#!/usr/bin/env python3
"""Checks the relative links of droidmesh's documents: README.md, ARCHITECTURE.md and docs/*.md.

Every `[text](target)` outside code must name a file that exists, and a `#anchor` must be a
heading of that file (GitHub's rule: lower case, punctuation dropped, spaces become `-`).
Links to web addresses are not followed. Prints each broken link and exits 1, else exits 0.
Standard library only.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")


def prose_lines(text):
    """The lines of a Markdown text outside fenced code, with their numbers."""
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """The anchor GitHub gives a heading."""
    text = re.sub(r"`", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path):
    """Every anchor of a Markdown file, duplicates numbered as GitHub numbers them."""
    seen = {}
    found = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def check(path):
    """The broken links of one file, as messages."""
    problems = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for m in LINK.finditer(INLINE_CODE.sub("", line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}:{number}: link '{target}'"
            if not dest.exists():
                problems.append(f"{where}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(
                    f"{where}: {dest.relative_to(ROOT)} has no heading with the anchor '#{anchor}'"
                )
    return problems


def main():
    files = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems = [p for f in files if f.exists() for p in check(f)]
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(
            f"check_links: {len(problems)} broken link(s); fix the target or the heading it names",
            file=sys.stderr,
        )
        return 1
    print(f"check_links: every relative link of {len(files)} documents resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
