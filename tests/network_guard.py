"""A ``sitecustomize`` that refuses TCP connections to public addresses in every Python process
started with its folder on ``PYTHONPATH`` (loopback and private addresses stay open: Ray and the
notebook kernels talk over them), so a command that needs the network fails in the tests instead
of passing on a machine that has it."""

from pathlib import Path

#: the message a refused connection raises
BLOCKED = "network blocked by the tests"

SITECUSTOMIZE = '''
import ipaddress, socket

_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex


def _check(sock, address):
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        return
    try:
        infos = socket.getaddrinfo(address[0], None)
    except (OSError, IndexError, TypeError):
        return
    for info in infos:
        ip = ipaddress.ip_address(info[4][0].split("%")[0])
        if not (ip.is_loopback or ip.is_private or ip.is_link_local):
            raise OSError(101, f"network blocked by the tests: {address[0]}")


def connect(self, address):
    _check(self, address)
    return _connect(self, address)


def connect_ex(self, address):
    _check(self, address)
    return _connect_ex(self, address)


socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
'''


def guard_folder(folder: Path) -> Path:
    """``folder`` holding the guard as ``sitecustomize.py``, for the front of ``PYTHONPATH``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder
