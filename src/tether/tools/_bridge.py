"""Inside the sandbox: a loopback port that leads to tether's proxy, then the command itself.

Run as ``python -I -S _bridge.py SOCKET COMMAND...`` (standard library only). It listens on
``127.0.0.1`` of the sandbox's own network namespace, sets ``HTTP_PROXY`` / ``HTTPS_PROXY`` to
that address, starts a child that carries each connection to the Unix socket ``SOCKET`` (tether's
proxy), and becomes the command. The child dies with the sandbox's PID namespace.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _carry(conn: socket.socket, path: str) -> None:
    try:
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        up.connect(path)
    except OSError:
        conn.close()
        return
    back = threading.Thread(target=_pipe, args=(up, conn), daemon=True)
    back.start()
    _pipe(conn, up)
    back.join()
    conn.close()
    up.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_carry, args=(conn, path), daemon=True).start()


def main(path: str, command: list[str]) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    if os.fork() == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _serve(listener, path)
        os._exit(0)
    listener.close()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ[name] = url
    os.environ.pop("NO_PROXY", None)
    os.environ.pop("no_proxy", None)
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
