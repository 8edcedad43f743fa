"""The state file: {session_id, resume_token, last_seq} on disk (SPEC 10)."""

import asyncio
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from typing import Callable

#: Saved after every welcome, and once this many frames arrived or SAVE_DELAY seconds passed
#: since the first unsaved one.
SAVE_EVERY = 32
SAVE_DELAY = 1.0


@dataclass
class SavedState:
    session_id: str
    resume_token: str
    last_seq: int
    join_token: str | None = None


def load_state(path: str) -> SavedState | None:
    """Reads a state file; None when it does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        obj = json.loads(data)
        st = SavedState(session_id=obj["session_id"], resume_token=obj["resume_token"],
                        last_seq=int(obj.get("last_seq", 0)), join_token=obj.get("join_token") or None)
        if not st.session_id or not st.resume_token:
            raise ValueError("empty")
        return st
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"backchannel: state_file {path} is not a state file of this SDK; remove it to start a new session") from None


def write_atomic(path: str, st: SavedState) -> None:
    """Writes st through a temporary file in the same directory and a rename (mode 0600), so
    that a crash leaves the old file or the new one, never a mix."""
    obj = {"session_id": st.session_id, "resume_token": st.resume_token, "last_seq": st.last_seq}
    if st.join_token:
        obj["join_token"] = st.join_token
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(obj) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class StateFile:
    """Keeps a connection's resumable state on disk, saved by the policy above."""

    def __init__(self, path: str, snapshot: Callable[[], SavedState], log: logging.Logger) -> None:
        self.path = path
        self._snapshot = snapshot
        self._log = log
        self._dirty = 0
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def touch(self) -> None:
        """One more frame was processed."""
        if self._closed:
            return
        self._dirty += 1
        if self._dirty >= SAVE_EVERY:
            self.save()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(SAVE_DELAY, self.save)

    def save(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._closed:
            return
        self._dirty = 0
        try:
            write_atomic(self.path, self._snapshot())
        except OSError as e:
            self._log.warning("backchannel: cannot write the state file %s: %s", self.path, e)

    def finish(self, remove: bool) -> None:
        """The end: with remove the file is deleted (the slot is gone for good), otherwise it is
        saved one last time."""
        if self._closed:
            return
        if not remove:
            self.save()
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if remove:
            remove_state(self.path, self._log)


def remove_state(path: str, log: logging.Logger) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("backchannel: cannot remove the state file %s: %s", path, e)
