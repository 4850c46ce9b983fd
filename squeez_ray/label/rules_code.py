"""Rules for version control and files: git log / blame / diff, file reads, grep, ls."""

from __future__ import annotations

import re

from squeez_ray.label.rule_base import Found, Obs

_COMMIT = re.compile(r"^commit ([0-9a-f]{7,40})")


def git_commit(obs: Obs) -> Found:
    """The commit block whose subject the query names (header, message, stat summary)."""
    lines = obs.lines
    starts = [i for i, line in enumerate(lines) if _COMMIT.match(line)]
    if len(starts) < 2:
        return None
    blocks = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        subject = next((lines[j].strip() for j in range(start + 1, end) if lines[j].startswith("    ")), "")
        if subject:
            blocks.append((start, end, subject))
    if not blocks:
        return None
    start, end, subject = obs.pick(blocks, [b[2] for b in blocks])
    if end - start > 25:  # a huge --stat: keep the header, the message and the summary line
        message_end = next((j for j in range(start + 1, end) if lines[j].startswith("    ")), start + 1)
        while message_end < end and (lines[message_end].startswith("    ") or not lines[message_end].strip()):
            message_end += 1
        spans = [(start + 1, message_end), (end, end)]
    else:
        spans = [(start + 1, end)]
    subject = subject if len(subject) <= 120 else subject[:117] + "..."
    return obs.template(["Which commit made the change \"{s}\", and who authored it when?",
                         "Find the commit described as \"{s}\": what did it touch?"], s=subject), spans


_BLAME = re.compile(r"^\^?([0-9a-f]{7,40}) .*?\(.+?\s(\d+)\)\s?(.*)$")
_DEFINES = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)|^([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]+)?=\s")


def git_blame_line(obs: Obs) -> Found:
    candidates = []
    for i, line in enumerate(obs.lines):
        match = _BLAME.match(line)
        if match:
            code = _DEFINES.match(match.group(3))
            if code:
                candidates.append((i, code.group(1) or code.group(2)))
    if not candidates:
        return None
    i, name = obs.pick(candidates, [c[1] for c in candidates])
    return obs.template(["Who last changed the line that defines {n}, and in which commit?",
                         "Which commit last touched the definition of {n}?"], n=name), [(i + 1, i + 1)]


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@ ?(.*)$")


def git_diff_hunk(obs: Obs) -> Found:
    lines = obs.lines
    hunks = []
    path = ""
    for i, line in enumerate(lines):
        if line.startswith("+++ "):
            path = line[4:].removeprefix("b/")
        match = _HUNK.match(line)
        if match:
            end = i + 1
            while end < len(lines) and lines[end][:1] in (" ", "+", "-", "\\") and not lines[end].startswith("+++ ") \
                    and not lines[end].startswith("--- "):
                end += 1
            changed = [j for j in range(i + 1, end) if lines[j][:1] in "+-"]
            if changed:
                hunks.append((i, changed[0], changed[-1] + 1, path, match.group(1).strip()))
    if len(hunks) < 2:
        return None
    header, first, last, path, context = obs.pick(hunks, [h[4] for h in hunks])
    where = f"{path} near `{context[:60]}`" if context else path
    return obs.template(["What exactly changes in {w}?", "Which lines are added or removed in {w}?"], w=where), \
        [(header + 1, header + 1), (first + 1, last)]


_CAT_N = re.compile(r"^\s*\d+\t")
_PY_DEF = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")
_TOML_SECTION = re.compile(r"^\[([^\]]+)\]\s*$")
_MD_SECTION = re.compile(r"^#{1,4}\s+(.+)$")


def file_definition(obs: Obs) -> Found:
    """One definition in a source file (def/class block), or one section of a config / markdown file."""
    code = [_CAT_N.sub("", line, count=1) for line in obs.lines]
    path = obs.argument() or "the file"
    blocks = []
    for i, line in enumerate(code):
        match = _PY_DEF.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        end = i + 1
        while end < len(code) and (not code[end].strip() or len(code[end]) - len(code[end].lstrip()) > indent
                                   or code[end].lstrip().startswith((")", "]"))):
            end += 1
        while end > i + 1 and not code[end - 1].strip():
            end -= 1
        if 3 <= end - i <= 40:
            # decorators directly above belong to the definition
            top = i
            while top > 0 and code[top - 1].strip().startswith("@"):
                top -= 1
            blocks.append((top, end, match.group(2)))
    if blocks:
        start, end, name = obs.pick(blocks, [b[2] for b in blocks])
        return obs.template(["How is {n} implemented in {p}?", "What does {n} in {p} do?",
                             "Show the definition of {n} in {p}."], n=name, p=path), [(start + 1, end)]
    # "# ..." is a heading in markdown but a comment in toml / cfg / yaml: pick the pattern by suffix
    pattern = _MD_SECTION if path.endswith((".md", ".markdown")) else _TOML_SECTION
    sections = []
    for i, line in enumerate(code):
        match = pattern.match(line)
        if match:
            sections.append((i, match.group(1).strip()))
    ranges = []
    for k, (i, title) in enumerate(sections):
        end = sections[k + 1][0] if k + 1 < len(sections) else len(code)
        while end > i + 1 and not code[end - 1].strip():
            end -= 1
        if 2 <= end - i <= 40:
            ranges.append((i, end, title))
    if not ranges:
        return None
    start, end, title = obs.pick(ranges, [r[2] for r in ranges])
    return obs.template(["What does the {t} section of {p} say?", "What is set under {t} in {p}?"],
                        t=title, p=path), [(start + 1, end)]


_GREP_HIT = re.compile(r"^(.+?):(\d+):(.*)$")


def grep_hits(obs: Obs) -> Found:
    """The hits that define the searched symbol, else the hits in one file."""
    pattern = ""
    if "-e" in obs.argv:
        index = obs.argv.index("-e") + 1
        pattern = obs.argv[index] if index < len(obs.argv) else ""
    hits = [(i, m.group(1), m.group(3)) for i, line in enumerate(obs.lines) if (m := _GREP_HIT.match(line))]
    if len(hits) < 2:
        return None
    name = re.escape(pattern.strip())
    defining = [i for i, _, text in hits
                if name and re.match(rf"\s*(?:async\s+def|def|class)\s+{name}\b|\s*{name}\s*(?::[^=]+)?=[^=]", text)]
    if defining and len(defining) * 2 <= len(hits):
        return obs.template(["Where is {n} defined?", "Which file defines {n}?"], n=pattern.strip()), \
            [(i + 1, i + 1) for i in defining]
    tests = [i for i, path, _ in hits if "test" in path.rsplit("/", 1)[-1]]
    if tests and len(tests) * 2 <= len(hits):
        return obs.template(["Which tests use {n}?", "Where do the tests exercise {n}?"], n=pattern.strip()), \
            [(i + 1, i + 1) for i in tests]
    by_file: dict[str, list[int]] = {}
    for i, path, _ in hits:
        by_file.setdefault(path, []).append(i)
    files = [f for f in sorted(by_file) if len(by_file[f]) * 2 <= len(hits)]
    if not files:
        return None
    path = obs.pick(files, files)
    return obs.template(["Where does {f} use {n}?", "Which lines of {f} mention {n}?"], f=path,
                        n=pattern.strip() or "the pattern"), [(i + 1, i + 1) for i in by_file[path]]


_LS_ENTRY = re.compile(r"^([dl-])[rwxsStT-]{9}\S*\s+\d+\s+\S+\s+\S+\s+(\d+)\s+(\S+\s+\S+\s+\S+)\s+(.+)$")


def ls_entry(obs: Obs) -> Found:
    entries = [(i, m.group(1), m.group(4)) for i, line in enumerate(obs.lines)
               if (m := _LS_ENTRY.match(line)) and m.group(4) not in (".", "..")]
    if len(entries) < 3:
        return None
    dirs = [e for e in entries if e[1] == "d"]
    if dirs and len(dirs) * 2 <= len(entries) and obs.pick([0, 1]) == 0:
        return obs.template(["Which subdirectories does {p} contain?"], p=obs.argument() or "the directory"), \
            [(i + 1, i + 1) for i, _, _ in dirs]
    i, _, name = obs.pick(entries, [e[2] for e in entries])
    return obs.template(["How large is {n} and when was it last modified?", "What are the permissions of {n}?"],
                        n=name), [(i + 1, i + 1)]

