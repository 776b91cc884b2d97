"""Which JupyterLab servers serve a folder now, so ``make lab-fresh`` does not hand out fresh
copies under a running lab: its kernels still hold the previous student's variables (a check
would call ``answer_1 = None`` correct), and its open tabs would save the old notebooks over the
fresh ones. ``python -m instir.lab_servers FOLDER`` prints one line per server and exits 1 when
one serves FOLDER: rooted at it, inside it, or above it (a plain ``jupyter lab`` at the repository's
root opens ``lab/``'s notebooks as well)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def running_servers(folder: str | Path) -> list[dict]:
    """The Jupyter servers of this user (``jupyter server list --json``) whose root folder is
    ``folder``, inside it or above it (each can open its notebooks), each as Jupyter lists it
    (``url``, ``port``, ``pid``, ``root_dir``)."""
    folder = Path(folder).resolve()
    try:
        listed = subprocess.run([sys.executable, "-m", "jupyter", "server", "list", "--json"], capture_output=True,
                                text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in listed.splitlines():
        try:
            server = json.loads(line)
            root = Path(server.get("root_dir") or server.get("notebook_dir")).resolve()  # none: not a server's line
        except (ValueError, TypeError, AttributeError):
            continue
        if root == folder or folder in root.parents or root in folder.parents:
            found.append(server)
    return found


def main(argv: list[str]) -> int:
    """Refuse (exit 1, one line per server) while a Jupyter server serves ``argv[0]``."""
    servers = running_servers(argv[0])
    for server in servers:
        root, lab = Path(server.get("root_dir") or server.get("notebook_dir")).resolve(), Path(argv[0]).resolve()
        above = root in lab.parents
        root = argv[0] if root == lab else root  # the folder as it was named
        print(f"JupyterLab is running on {root} (port {server.get('port')}, pid {server.get('pid')})"
              f"{f', a folder above {argv[0]}' if above else ''}: its kernels still hold the previous answers and "
              "its open tabs would save the old notebooks over fresh copies; stop it first (Ctrl-C in its terminal, "
              f"or: .venv/bin/jupyter server stop {server.get('port')}), then make lab-fresh again", file=sys.stderr)
    return 1 if servers else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
