"""The raw escape hatch: the whole output, unpruned, for one call or for a whole session (issue 37 item 9).

Per call (the agent or the user writes it into the command; bash ignores both):
    SQUEEZ_RAW=1 pytest -q            an assignment anywhere in the command
    pytest -q  # squeez:raw           a trailing marker comment
Per session:
    SQUEEZ_RAW=1 claude               the agent started with SQUEEZ_RAW set (1/true/yes/on): hooks off
    SQUEEZ_RAW=session pytest -q      this call and every later call of the same session run raw;
                                      recorded as a file named by the session id under
                                      $XDG_STATE_HOME/squeez/raw-sessions (~/.local/state/...):
                                      delete it, or `SQUEEZ_RAW=prune CMD`, to prune again.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

_ASSIGNED = re.compile(r"(?:^|[\s;&|(])SQUEEZ_RAW=(['\"]?)([\w-]*)\1")
_MARKER = re.compile(r"#\s*squeez:\s*raw\b", re.IGNORECASE)
_SESSION_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_TRUE = {"1", "true", "yes", "on"}


def raw_requested(command: str, session_id: Any, environ: Any = None) -> bool:
    """True when this call must run unpruned; records or clears a session's switch on the way."""
    environ = os.environ if environ is None else environ
    if str(environ.get("SQUEEZ_RAW", "")).strip().lower() in _TRUE:
        return True
    match = _ASSIGNED.search(command)
    switch = session_switch(session_id, environ)
    if match and match.group(2).lower() == "prune":
        if switch is not None:
            switch.unlink(missing_ok=True)
        return True  # this call still carries the assignment: leave it as typed
    if match and match.group(2).lower() == "session" and switch is not None:
        switch.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        switch.touch()
    return bool(match or _MARKER.search(command) or (switch is not None and switch.is_file()))


def session_switch(session_id: Any, environ: Any = None) -> Path | None:
    """Where a session's raw switch lives, or None for a missing or odd session id."""
    environ = os.environ if environ is None else environ
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id) or session_id in (".", ".."):
        return None
    state = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "squeez" / "raw-sessions" / session_id
