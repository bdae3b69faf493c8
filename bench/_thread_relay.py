"""The floor of the relay's design, for bench_proxy: `python _thread_relay.py AGENT...` relays
stdin -> AGENT -> stdout with two threads on raw fds (64 KiB `os.read`, `os.write`), as
recorder/relay.py does, and records nothing. What the proxy adds beyond this is its recording
(the spool queue, checksums, newline counts, the spool writer and the loader beside it); what this
adds beyond `cat` is the cost of relaying in Python threads at all."""

import os
import subprocess
import sys
import threading

from _common import write_all  # (this script's folder is first on sys.path)


def pump(src: int, dst: int) -> None:
    read = os.read
    while True:
        data = read(src, 64 * 1024)
        if not data:
            break
        write_all(dst, data)
    if dst != 1:
        os.close(dst)


def main() -> int:
    agent = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             bufsize=0)
    to_agent = threading.Thread(target=pump, args=(0, agent.stdin.fileno()), daemon=True)
    to_client = threading.Thread(target=pump, args=(agent.stdout.fileno(), 1), daemon=True)
    to_agent.start()
    to_client.start()
    to_client.join()
    return agent.wait()


if __name__ == "__main__":
    sys.exit(main())
