"""One writer per report folder: a lock file (``.instir-run.lock``) held with ``flock`` by
whichever front end writes the folder — ``instir run``, ``instir sweep``, ``instir evaluate``,
``instir judge``, and every stage a notebook or a Python session calls — holding who took it
(what, pid, host, start time), so a second writer is refused with a line naming the first, and
the index can tell a report that is still running from one whose run was interrupted (the lock
is released when the process ends, however it ends).

Before the lock is taken, a folder the kit must not write is refused (:func:`refuse_unsafe_folder`:
inside the cache root, or with subfolders that lead elsewhere by symlink).

A holder's own work never waits on its lock: within the process the lock is re-entrant (the
sweep calling the stages), and the processes it starts inherit it (``instir run``'s notebook
kernels, the sweep's Ray workers) through :data:`INHERITED_VAR`, which names the folder and the
lock's token; a process that merely copies the variable cannot pass for the holder once the
holder has ended, as the token is checked against the lock file's while its lock is held.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path

from instir.errors import UsageError, quoted
from instir.home import HOME_VAR, instir_home
from instir.inputs import expanded, file_problem, read_json
from instir.stamps import utc_now

LOCK_FILE = ".instir-run.lock"
#: Environment variable through which child processes inherit their parent's locks: a JSON
#: object ``{folder: token}`` (a folder name may hold any character but NUL).
INHERITED_VAR = "INSTIR_FOLDER_LOCKS"

#: How often, and how far apart, a writer tries a busy lock before it names the holder: a reader
#: (:func:`holder_of`, as every index rewrite asks) holds it shared for an instant, a writer for its whole work.
BUSY_TRIES, BUSY_WAIT_S = 20, 0.025

#: folders this process holds: resolved path -> (lock, depth)
_HELD: dict[Path, list] = {}
_GUARD = threading.Lock()


def _inherited() -> dict[str, str]:
    try:
        entries = json.loads(os.environ.get(INHERITED_VAR) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in entries.items()} if isinstance(entries, dict) else {}


def _set_inherited(entries: dict[str, str]) -> None:
    if entries:
        os.environ[INHERITED_VAR] = json.dumps(entries)
    else:
        os.environ.pop(INHERITED_VAR, None)


def refuse_unsafe_folder(folder: Path) -> None:
    """Refuse (a :class:`~instir.errors.UsageError` naming the path) a report folder inside the
    cache root (deleting that root is always safe, so a report there could vanish with it), and
    one whose subfolders (or theirs) lead outside it by symlink: the kit would write its runs,
    metrics or judgments into a folder elsewhere, which the report cannot own or keep."""
    home = instir_home().resolve()
    if folder == home or home in folder.parents:
        raise UsageError(f"{folder} lies inside the cache root {home} (${HOME_VAR}), whose contents may be deleted "
                         "at any time: write the report elsewhere")
    if not folder.is_dir():
        return
    subfolders = [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
    for child in itertools.chain(folder.iterdir(), *(sub.iterdir() for sub in subfolders)):
        if child.is_symlink() and child.is_dir():
            target = child.resolve()
            if target != folder and folder not in target.parents:
                raise UsageError(f"{child} is a symlink to {target}, outside {folder}: the kit writes a report's files "
                                 "inside its folder only; replace the link by a folder, or write elsewhere")


class FolderLock:
    """The lock of ``folder`` as a context manager, taken by ``who`` (``"instir sweep"``, ``"a
    notebook"`` …): entering takes it, or joins a hold of this process or of the process that
    started this one, or raises :class:`instir.errors.UsageError` naming the writer that holds it."""

    def __init__(self, folder: str | Path, who: str = "instir run"):
        self.folder = expanded(folder).resolve()
        self.path = self.folder / LOCK_FILE
        self.who = who
        self._fd: int | None = None
        self._token = ""
        self._joined = False
        self._made = False
        self._replaced: int | None = None

    def __enter__(self) -> FolderLock:
        with _GUARD:
            held = _HELD.get(self.folder)
            if held is not None:
                held[1] += 1
                self._joined = True
                return self
            refuse_unsafe_folder(self.folder)
            self._made = not self.folder.exists()
            self.folder.mkdir(parents=True, exist_ok=True)
            problem = file_problem(self.path)
            if problem is None and os.path.islink(self.path):  # writing who holds it would write the file it leads to
                problem = f"is a symlink (to {quoted(os.readlink(self.path))}), not a lock file the kit made"
            if problem not in (None, "not found"):
                raise UsageError(f"{self.path} {problem}: the kit keeps the lock of the folder's writers there; "
                                 "remove it")
            from instir import atomic

            try:  # the mode a plain open gives: in a group's folder (umask 002), each member can write it
                if problem is None and os.stat(self.path).st_nlink > 1:
                    # another name shares the file (a hard link, a `cp -al` copy of the folder): a new lock file takes
                    # its place, so that who holds the lock is written into this folder's alone
                    fd = self._replace_unwritable()
                else:
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
            except PermissionError:  # another account's lock file (0644), which this one cannot write
                fd = self._replace_unwritable()
            except OSError as err:  # made a symlink since it was looked at
                raise UsageError(f"{self.path} {err.strerror}: the kit keeps the lock of the folder's writers there; "
                                 "remove it") from err
            atomic.HELD_LOCKS.add(fd)  # workers it forks keep no copy: the lock goes with this process
            if self._replaced is not None:
                pass  # taken: the file's own lock was free and is held, the new file at its place is locked
            elif not _taken(fd):
                holder = holder_of(self.folder) or {}
                if holder.get("token") and _inherited().get(str(self.folder)) == holder["token"]:
                    atomic.close_lock(fd)
                    self._joined = True  # the parent holds it for this process's work
                    return self
                if not _taken(fd, BUSY_TRIES):
                    atomic.close_lock(fd)
                    raise _busy(self.folder)
            self._token = secrets.token_hex(16)
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"who": self.who, "pid": os.getpid(), "host": socket.gethostname(),
                                     "started": utc_now(),
                                     "token": self._token}).encode())
            self._fd = fd
            _HELD[self.folder] = [self, 1]
            _set_inherited({**_inherited(), str(self.folder): self._token})
            return self

    def _replace_unwritable(self) -> int:
        """The lock file of another account that this one cannot write (or one another name shares): when no writer
        holds it (its lock taken on the file opened to read, and kept, so a process that opened it still finds it
        held), a new lock file, locked, with the mode a plain open gives, takes its place; else the usual refusal
        naming the writer that holds it."""
        from instir import atomic

        try:
            old = os.open(self.path, os.O_RDONLY)
        except OSError as err:
            raise UsageError(f"{self.path} cannot be read by this account ({err.strerror}): the kit keeps the lock of "
                             "the folder's writers there; remove it, or write elsewhere") from err
        if not _taken(old, BUSY_TRIES):
            os.close(old)
            raise _busy(self.folder)
        new, fd = self.path.with_name(f"{LOCK_FILE}.{secrets.token_hex(8)}.tmp"), None
        try:
            fd = os.open(new, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.replace(new, self.path)
        except OSError as err:
            os.close(old)
            if fd is not None:
                os.close(fd)
            new.unlink(missing_ok=True)
            raise UsageError(f"{self.path} is another account's lock file, which this one can neither write nor "
                             f"replace ({err.strerror}): write elsewhere") from err
        atomic.HELD_LOCKS.add(old)
        self._replaced = old
        return fd

    def __exit__(self, *exc) -> None:
        with _GUARD:
            held = _HELD.get(self.folder)
            if self._joined:
                if held is not None and held[0] is not self:
                    held[1] -= 1
                self._joined = False
                return
            if self._fd is None:
                return
            entries = _inherited()
            entries.pop(str(self.folder), None)
            _set_inherited(entries)
            _HELD.pop(self.folder, None)
            if self._made and os.listdir(self.folder) == [LOCK_FILE]:  # a folder it made for work refused at once
                with contextlib.suppress(OSError):
                    self.path.unlink()
                    self.folder.rmdir()
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            from instir import atomic

            atomic.close_lock(self._fd)
            self._fd = None
            if self._replaced is not None:
                atomic.close_lock(self._replaced)
                self._replaced = None


def _busy(folder: Path) -> UsageError:
    """The refusal of a second writer, naming the one that holds ``folder``'s lock."""
    holder = holder_of(folder) or {}
    return UsageError(f"another writer ({holder.get('who', 'instir run')}, pid {holder.get('pid', '?')} on "
                      f"{holder.get('host', '?')}, started {holder.get('started', '?')}) is writing into {folder}: "
                      "wait for it to finish, or write elsewhere (another --out / out_dir)")


def _taken(fd: int, tries: int = 1) -> bool:
    """Whether ``fd``'s exclusive lock was taken within ``tries`` tries, :data:`BUSY_WAIT_S` apart: a reader asking
    :func:`holder_of` holds it for an instant, and a writer meeting one is not refused for it (4 to 10 % of attempts
    were, beside a process asking in a loop)."""
    for n in range(tries):
        if n:
            time.sleep(BUSY_WAIT_S)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        return True
    return False


#: Who a stage says writes when no front end holds the folder for it: a notebook (in JupyterLab
#: or under plain papermill) or a Python session calling the stage itself.
STAGE_WRITER = "a notebook or Python session"


def writer_of(folder: str | Path) -> str | None:
    """Who holds ``folder``'s lock for this process's work (its own hold or the one it
    inherited), or None when this process writes without one."""
    resolved = expanded(folder).resolve()
    with _GUARD:
        held = _HELD.get(resolved)
    if held is not None:
        return held[0].who
    if str(resolved) in _inherited():
        holder = holder_of(resolved) or {}
        return holder.get("who")
    return None


def holder_of(folder: str | Path) -> dict | None:
    """Who holds the lock of ``folder`` (who, pid, host, started), or None when no writer holds it."""
    path = Path(folder) / LOCK_FILE
    if file_problem(path) is not None:  # none, or not a lock the kit made (opening a FIFO would block)
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_json(path)
            return holder if isinstance(holder, dict) else {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
