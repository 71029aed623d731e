#!/usr/bin/env python3
"""A link with delay, loss and a rate, between two TAP devices, for the network lab.

This kernel has no netem qdisc, so the lab's wide-area link is this process: it opens
two TAP devices by name (created by the caller, then moved into the two hosts'
namespaces, which keeps the open descriptors working), and copies each Ethernet frame
from one to the other after the link's delay, unless it is lost, paced to the rate,
with a bounded queue (a router's buffer: a frame that does not fit is dropped).

Usage: impair.py TAP_A TAP_B DELAY_MS LOSS_PERCENT RATE_KBIT QUEUE_BYTES SEED

Prints "ready" once both devices are open, then runs until killed. On SIGUSR1 it
prints what it did per direction (frames in, lost, dropped at the queue, forwarded),
so a test can check that the impairment is what it asked for.
"""

import fcntl
import heapq
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def open_tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def main():
    a_name, b_name = sys.argv[1], sys.argv[2]
    delay = float(sys.argv[3]) / 1000.0
    loss = float(sys.argv[4]) / 100.0
    rate_bps = float(sys.argv[5]) * 1000.0
    queue_limit = int(sys.argv[6])
    rng = random.Random(int(sys.argv[7]))
    a, b = open_tap(a_name), open_tap(b_name)
    other = {a: b, b: a}
    # Per direction (keyed by the source fd): when the link is free again, bytes
    # queued, and counts.
    free_at = {a: 0.0, b: 0.0}
    queued = {a: 0, b: 0}
    stats = {fd: {"in": 0, "lost": 0, "queue_full": 0, "out": 0} for fd in (a, b)}
    pending = []  # (release time, sequence, source fd, frame)
    seq = 0

    def report(_signum, _frame):
        names = {a: f"{a_name}->{b_name}", b: f"{b_name}->{a_name}"}
        for fd, s in stats.items():
            print(f"{names[fd]} in={s['in']} lost={s['lost']} queue_full={s['queue_full']} out={s['out']}", flush=True)

    signal.signal(signal.SIGUSR1, report)
    print("ready", flush=True)
    while True:
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, _, src, frame = heapq.heappop(pending)
            queued[src] -= len(frame)
            try:
                os.write(other[src], frame)
                stats[src]["out"] += 1
            except OSError:
                pass
        timeout = max(0.0, pending[0][0] - now) if pending else 1.0
        try:
            ready, _, _ = select.select([a, b], [], [], timeout)
        except InterruptedError:
            continue
        now = time.monotonic()
        for src in ready:
            try:
                frame = os.read(src, 65536)
            except OSError:
                continue
            stats[src]["in"] += 1
            if rng.random() < loss:
                stats[src]["lost"] += 1
                continue
            if queued[src] + len(frame) > queue_limit:
                stats[src]["queue_full"] += 1
                continue
            start = max(now, free_at[src])
            free_at[src] = start + len(frame) * 8.0 / rate_bps
            queued[src] += len(frame)
            seq += 1
            heapq.heappush(pending, (free_at[src] + delay, seq, src, frame))


if __name__ == "__main__":
    main()
