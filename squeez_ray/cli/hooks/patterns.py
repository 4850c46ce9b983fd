"""Which shell commands the agent hooks wrap in ``squeez run``, and which they leave alone.

Wrapped: a command with a simple command (between ``&&``, ``||``, ``;``) that matches a family's
pattern (tests, builds, linters, searches, git history, package installers, file reads). The
patterns are regular expressions matched at the start of each simple command, after leading
``VAR=value`` assignments and runner prefixes (``sudo``, ``time``, ``uv run``, ``npx`` ...) are
removed. The config file's ``hook_patterns`` (a mapping family -> list of regexes) replaces the
families it names; an empty list turns a family off.

Left alone, whatever matches (a rewrite must never change what the command does):
- bounded reads, whose window the agent already chose (``bounded_read``: ``head``, ``tail -n``,
  ``sed -n A,Bp``, ``wc``, ``git show --stat``, ``git log --oneline -20``, ``git blame -L``): a part
  that is one counts for no family, so a chain of them is not wrapped;
- commands already wrapped, or already piped into squeez;
- interactive programs (editors, pagers, REPLs, ssh, ``top``, ``tail -f``, ``git add -p`` ...);
- output sent elsewhere: a top-level pipe ``|``, a redirection to a file (``> out.log``;
  ``2>&1`` and ``> /dev/null`` are fine), background ``&``;
- commands that change the calling shell's state (``cd``, ``export``, ``source`` ...): the wrapped
  command runs in a child ``bash``, so the agent's next command would not see the change. The one
  exception is the shape agents write most, a leading ``cd DIR && CMD``: the ``cd`` stays outside, in
  the agent's shell, and only ``CMD`` is wrapped (``split_cd_prefix``);
- anything the shell lexer cannot read (an open quote), multi-line scripts, subshells ``( ... )``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

DEFAULT_PATTERNS: dict[str, list[str]] = {
    "test": [r"(python[\d.]* -m )?(pytest|py\.test|tox|nox)\b", r"python[\d.]* -m unittest\b",
             r"(npm|pnpm|yarn|bun)( run)? test\b", r"(jest|vitest|mocha|karma|ava|playwright test)\b",
             r"cargo (test|nextest)\b", r"go test\b", r"(bundle exec )?rspec\b", r"(phpunit|ctest)\b",
             r"(dotnet|swift|mix) test\b", r"make (test|check)\b", r"(mvn|\./mvnw|gradle|\./gradlew)\b.*\btest\b"],
    "build": [r"(make|cmake|ninja|bazel|buck2?|scons)\b", r"cargo (build|check)\b", r"go (build|vet)\b",
              r"(npm|pnpm|yarn|bun)( run)? build\b", r"(tsc|webpack|esbuild|rollup)\b", r"(vite|next) build\b",
              r"(mvn|\./mvnw|gradle|\./gradlew)\b", r"dotnet build\b", r"docker (compose )?build\b",
              r"python[\d.]* -m build\b"],
    "lint": [r"(ruff|flake8|pylint|mypy|pyright|eslint|golangci-lint|shellcheck|hadolint|rubocop|stylelint)\b",
             r"(black|isort|prettier) .*--check\b", r"cargo clippy\b", r"(npm|pnpm|yarn|bun)( run)? (lint|typecheck)\b",
             r"pre-commit run\b"],
    "grep": [r"(grep|egrep|fgrep|rg|ag|ack)\b", r"git grep\b", r"find\b"],
    "git": [r"git (log|diff|blame|show|shortlog|reflog)\b"],
    "install": [r"(pip[\d.]*|python[\d.]* -m pip|uv pip) install\b", r"uv (sync|add)\b",
                r"(npm|pnpm|yarn|bun) (install|i|ci|add)\b", r"(apt|apt-get|dnf|yum|apk|brew) install\b",
                r"(conda|mamba|poetry|gem|bundle|composer|cargo) (install|add)\b", r"go (get|install)\b"],
    "read": [r"cat\b", r"sed -n\b", r"head\b", r"tail\b", r"nl\b"],
}

# Prefixes that run the real command: the pattern is matched after them.
_RUNNERS = {"sudo", "time", "env", "nice", "nohup", "command", "npx", "bunx"}
_TWO_WORD_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("hatch", "run"), ("pnpm", "exec"),
                     ("bundle", "exec")}
_INTERACTIVE = {"vim", "vi", "nvim", "nano", "emacs", "pico", "less", "more", "most", "man", "top", "htop", "btop",
                "watch", "ssh", "telnet", "ftp", "sftp", "mysql", "psql", "sqlite3", "redis-cli", "mongo", "mongosh",
                "irb", "ipython", "bpython", "ghci", "screen", "tmux", "fzf", "gdb", "pdb", "lldb"}
_REPLS = {"python", "python3", "node", "bash", "sh", "zsh", "R", "julia", "lua", "ruby"}
_SHELL_STATE = {"cd", "pushd", "popd", "export", "source", ".", "alias", "unalias", "unset", "set", "shopt",
                "eval", "exec", "ulimit", "umask"}
_SEPARATORS = {"&&", "||", ";", ";;"}
_SAFE_TARGETS = re.compile(r"^(/dev/null|&\d|&-|\d)$")


# `cd DIR && REST` with DIR one plain, single- or double-quoted word (no expansions that could differ).
_CD_PREFIX = re.compile(r"""^\s*cd\s+(?:[^\s;&|<>()`$'"\\]+|'[^']*'|"[^"$`\\]*")\s*&&\s*""")


def split_cd_prefix(command: str) -> tuple[str, str]:
    """(``cd DIR && ``, the rest) for a command that starts by changing directory, else ("", command).

    Agents write ``cd pkg && pytest -q`` more than any other shape; the prefix is kept verbatim in the
    agent's own shell (its directory change persists as it would have) and only the rest is wrapped.
    """
    match = _CD_PREFIX.match(command) if isinstance(command, str) else None
    if match is None or not command[match.end():].strip():
        return "", command
    return command[:match.end()], command[match.end():]


def compile_patterns(overrides: Mapping[str, Sequence[str]] | None = None) -> dict[str, list[re.Pattern]]:
    """The default families with ``overrides`` (family -> regexes) replacing the ones it names."""
    families = dict(DEFAULT_PATTERNS)
    families.update({name: list(regexes) for name, regexes in (overrides or {}).items()})
    return {name: [re.compile(rf"^(?:{regex})") for regex in regexes] for name, regexes in families.items()}


def pattern_problems(overrides: object) -> list[str]:
    """Config check for ``hook_patterns``: every problem, each naming the family and the regex."""
    if overrides is None:
        return []
    if not isinstance(overrides, Mapping):
        return [f"hook_patterns: expected a mapping of family -> list of regexes, got {overrides!r}"]
    problems = []
    for name, regexes in overrides.items():
        if not isinstance(regexes, (list, tuple)):
            problems.append(f"hook_patterns.{name}: expected a list of regexes, got {regexes!r}")
            continue
        for regex in regexes:
            try:
                re.compile(str(regex))
            except re.error as error:
                problems.append(f"hook_patterns.{name}: {regex!r} is not a regular expression ({error})")
    return problems


def should_wrap(command: str, patterns: Mapping[str, Sequence[str]] | None = None,
                exclude: Sequence[str] = ()) -> str | None:
    """The family whose pattern matched (``"test"``, ``"grep"`` ...), or None to leave the command alone.

    ``patterns``: overrides as in the config's ``hook_patterns``; ``exclude``: families not to wrap.
    """
    segments = simple_commands(command)
    if not segments:
        return None
    compiled = compile_patterns(patterns)
    family = None
    for words in segments:
        if _leave_alone(words):
            return None
        if bounded_read(_strip_runners(words)):
            continue  # the agent already chose its window: nothing to prune in this part
        line = " ".join(_strip_runners(words))
        for name, regexes in compiled.items():
            if family is None and name not in exclude and any(r.match(line) for r in regexes):
                family = name
    return family


def simple_commands(command: str) -> list[list[str]] | None:
    """The command's simple commands as word lists; None when it must be left alone as a whole."""
    if not isinstance(command, str) or not command.strip() or "\n" in command.strip() or "`" in command:
        return None
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an open quote: we cannot tell what it runs
        return None
    segments: list[list[str]] = [[]]
    for i, token in enumerate(tokens):
        if token in _SEPARATORS:
            segments.append([])
        elif token in {"|", "|&", "&", "(", ")", "{", "}"}:
            return None  # piped elsewhere, backgrounded, a subshell or group
        elif token in {">", ">>", "&>", "&>>", ">|", ">&"}:
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if token == ">&" and target.isdigit():
                continue
            if not _SAFE_TARGETS.match(target):
                return None  # output goes to a file
        else:
            segments[-1].append(token)
    return [words for words in segments if words] or None


_SED_WINDOW = re.compile(r"^\d+(,\d+)?p$")
_COUNT = re.compile(r"^-\d+$")
_GIT_SUMMARY = {"--stat", "--shortstat", "--numstat", "--name-only", "--name-status", "--summary", "--dirstat"}
_GIT_PATCH = {"-p", "-u", "--patch", "-U", "--cc", "--full-diff", "--word-diff"}


def bounded_read(words: list[str]) -> bool:
    """A read whose size the agent already chose: ``head``, ``tail`` (not ``-n +N``), ``sed -n A,Bp``,
    ``wc``, ``git show/diff --stat`` (and the other summaries, without a patch), ``git log --oneline``
    with a count, ``git blame -L``. Wrapping them prunes a window the agent picked on purpose."""
    if not words:
        return False
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    if name in ("head", "wc"):
        return True
    if name == "tail":
        return not any(a.startswith("+") or a.startswith("-n+") or a.startswith("--lines=+") for a in args)
    if name == "sed":
        return len(args) >= 2 and args[0] == "-n" and bool(_SED_WINDOW.match(args[1])) and \
            not any(a.startswith("-") for a in args[2:])
    if name != "git" or not args:
        return False
    sub, rest = args[0], args[1:]
    if any(a in _GIT_PATCH or a.startswith(("-U", "--unified")) for a in rest):
        return False
    if sub in ("show", "diff"):
        return any(a in _GIT_SUMMARY or a.startswith("--stat=") for a in rest)
    if sub == "log":
        counted = any(_COUNT.match(a) or a in ("-n", "--max-count") or a.startswith("--max-count=") for a in rest)
        return counted and ("--oneline" in rest or any(a in _GIT_SUMMARY for a in rest))
    return sub == "blame" and any(a == "-L" or a.startswith("-L") for a in rest)


def _strip_runners(words: list[str]) -> list[str]:
    i = 0
    while i < len(words):
        word = words[i]
        if re.match(r"^[A-Za-z_]\w*=", word):
            i += 1
        elif word in _RUNNERS:
            i += 1
            while i < len(words) and words[i].startswith("-"):  # sudo -E, env -i
                i += 1
        elif word == "timeout":
            i += 2 if i + 1 < len(words) else 1
        elif i + 1 < len(words) and (word, words[i + 1]) in _TWO_WORD_RUNNERS:
            i += 2
        else:
            break
    return words[i:]


def _leave_alone(words: list[str]) -> bool:
    real = _strip_runners(words)
    if not real:
        return False
    name = real[0].rsplit("/", 1)[-1]
    if name == "squeez" or "squeez_ray.cli" in real or name in _SHELL_STATE or name in _INTERACTIVE:
        return True
    if name in _REPLS and (len(real) == 1 or real[1] in {"-i", "-"}):
        return True
    if name in {"tail", "journalctl", "kubectl", "docker"} and any(w in {"-f", "-F", "--follow"} for w in real):
        return True
    if name in {"docker", "kubectl", "podman"} and any(w in {"-it", "-ti", "-i", "--interactive"} for w in real):
        return True
    return name == "git" and len(real) > 1 and real[1] in {"add", "rebase", "commit", "checkout", "reset"} and \
        any(w in {"-p", "-i", "--patch", "--interactive"} for w in real)
