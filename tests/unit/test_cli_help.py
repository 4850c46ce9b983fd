"""`squeez --help` is the front door: it names every subcommand before the pipe's long flag list (issue 40)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from squeez_ray.cli import main
from squeez_ray.cli.subcommands import WORDS

SQUEEZ = Path(sys.executable).parent / "squeez"


def commands_block(text: str) -> str:
    start = text.index("commands (squeez COMMAND -h for each):")
    return text[start:text.index("positional arguments:", start)]


def test_help_lists_every_subcommand_first():
    out = subprocess.run([str(SQUEEZ), "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    block = commands_block(out.stdout)
    for word in WORDS:  # `uninstall` rides on install's line
        assert f"squeez {word}" in block or f"({word} AGENT" in block, (word, block)
    assert out.stdout.index("commands (") < out.stdout.index("--input-file")


@pytest.mark.parametrize("word", WORDS)
def test_each_listed_subcommand_has_its_own_help(word, capsys):
    try:
        code = main([word, "-h"])
    except SystemExit as done:  # argparse's own -h; `squeez run` answers it without exiting
        code = done.code
    assert code == 0
    assert capsys.readouterr().out.startswith(f"usage: squeez {word}")
