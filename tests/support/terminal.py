"""A command on a real pseudo-terminal, for tests of what a user sees there (spinners, prompts,
Ctrl-C)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import sys
import time


class Terminal:
    """`vedana chat` on a real pseudo-terminal: it is the session's controlling terminal, so
    Ctrl-C reaches the process as SIGINT exactly as from a user's keyboard."""

    ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\r")

    def __init__(self, env: dict[str, str], *args: str) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes vedana
            os.execvpe(sys.executable, [sys.executable, "-m", "vedana", *args], env)
        self.pid, self.fd, self.seen, self.pos = pid, fd, "", 0

    def screen(self) -> str:
        return self.ANSI.sub("", self.seen)

    def expect(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """Wait for `pattern` (a regex) in what the terminal shows after the last match, and
        move past it: keys sent next answer the screen as it is now, not an earlier prompt."""
        deadline = time.monotonic() + timeout
        while True:
            match = re.compile(pattern).search(self.screen(), self.pos)
            if match:
                self.pos = match.end()
                return match
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"never saw {pattern!r}; screen so far:\n{self.screen()[-2000:]}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:  # the child closed the terminal
                    raise AssertionError(
                        f"vedana chat ended before {pattern!r}:\n{self.screen()[-2000:]}"
                    ) from None

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            try:
                if select.select([self.fd], [], [], 0.2)[0]:
                    self.seen += os.read(self.fd, 65536).decode(errors="replace")
            except OSError:
                time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("vedana chat did not leave")

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)
