"""One interpreter per tree that has imported its SGLang, forking a child per run.

Importing torch, Triton and a tree's SGLang takes a child about 12 CPU
seconds on a CPU host, and the test suite starts dozens of children on the
same four trees. ``python -m mla_harness.forkserver --tree DIR --device cpu
--socket PATH`` does what every child does before its work (``child.enter``,
then the import of the backend module under test, ``PRELOAD``), then serves
runs: each connection on ``PATH`` hands it a module, its arguments, the
working directory and the files for stdout and stderr; it forks, and the fork
runs the module as ``python -m`` would (``runpy``, ``__main__``, ``sys.argv``)
and exits as that interpreter would. The server sends back the fork's pid,
then its exit status (``subprocess``'s ``returncode``: negative for a
signal). Each fork is a process of its own, so what one run changes (backends,
globals, replacements) no other run sees. When its stdin closes (the parent
is gone) the server kills the forks still running and exits. CPU only: a
fork cannot use its parent's CUDA, so on a GPU the children start afresh
(``child.run``).
"""

from __future__ import annotations

import array
import contextlib
import gc
import json
import os
import runpy
import selectors
import signal
import socket
import sys
from pathlib import Path

# Every module served imports this, the backend under test, and what it
# imports (torch, Triton, SGLang): the forks get it already imported.
PRELOAD = "sglang.srt.layers.attention.trtllm_mla_backend"
# The children that import PRELOAD anyway (``kv_indices_check`` loads one
# kernel file alone, so it is not served).
SERVED = frozenset(
    f"mla_harness.{name}"
    for name in ("probe", "mode_checks", "runner_check", "dcp_check", "ragged_verify_check")
)
FDS = 2  # stdout, stderr


def serve(listener: socket.socket) -> dict:
    """Accept runs until stdin closes (then exit); return a run's request in
    the fork that is to run it (its stdout and stderr already in place)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    running: dict[int, socket.socket] = {}  # pid -> its connection
    while True:
        for key, _ in selector.select():
            if key.fileobj is sys.stdin and not sys.stdin.buffer.read1(4096):
                for pid in running:  # the parent is gone: so is their use
                    os.kill(pid, signal.SIGKILL)
                sys.exit(0)
            if key.fileobj is wake_r:
                os.read(wake_r, 4096)
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    request, fds = receive(conn)
                except (OSError, ValueError):  # a client gone mid-request
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:  # the fork: leave the server behind
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for fd in (wake_r, wake_w, listener.fileno(), conn.fileno()):
                        os.close(fd)
                    for conn_of_other in running.values():
                        conn_of_other.close()
                    null = os.open(os.devnull, os.O_RDONLY)
                    for target, fd in enumerate((null, *fds)):
                        os.dup2(fd, target)
                        os.close(fd)
                    return request
                for fd in fds:
                    os.close(fd)
                conn.sendall(f"{pid}\n".encode())
                running[pid] = conn
        while running:  # reap every fork that ended; report its status
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = running.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):  # a client gone (its timeout)
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                conn.close()


def receive(conn: socket.socket) -> tuple[dict, list[int]]:
    """A request: one JSON line and its stdout / stderr descriptors."""
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, ancdata, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(FDS * 4))
        if not chunk:
            raise ConnectionError("the parent closed the connection mid-request")
        data += chunk
        for level, kind, payload in ancdata:
            if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
                fds += array.array("i", payload[: len(payload) - len(payload) % 4]).tolist()
    return json.loads(data), fds


def run(request: dict) -> None:
    """In the fork: the module as ``python -m module args`` runs it."""
    os.chdir(request["cwd"])
    if request.get("cpus"):
        os.sched_setaffinity(0, request["cpus"])
    sys.argv = [request["module"], *request["args"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


def main(argv=None) -> int:
    from . import child

    parser = child.parser(__doc__)
    parser.add_argument("--socket", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.device != "cpu":
        raise SystemExit("forkserver: CPU only (a fork cannot use its parent's CUDA context)")
    child.enter(args)
    __import__(PRELOAD)
    # What the imports made stays for every fork: no collection in a fork walks
    # it (or copies its pages, which a collection's writes would).
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(args.socket))
    listener.listen()
    print("ready", flush=True)
    run(serve(listener))
    return 0


if __name__ == "__main__":
    sys.exit(main())
