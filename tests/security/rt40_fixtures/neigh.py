#!/usr/bin/python3
# Red team 40: a --net host agent sends one UDP datagram to each of <n> addresses of an on-link
# IPv6 /64 and of an on-link IPv4 subnet. Each new on-link destination makes the kernel create a
# neighbour entry (and, for IPv6, one more for its solicited-node multicast group); the
# neighbour tables are one per machine, shared by every network namespace.
# Usage: neigh.py <dir> <n> <v6 prefix> <v4 prefix of a /16>; results to <dir>/neigh.log.
import socket, sys, time
d, n, p6, p4 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = open(f"{d}/neigh.log", "a", buffering=1)
def say(*a): out.write(" ".join(str(x) for x in a) + "\n")
time.sleep(1)
for fam, name, addr in ((socket.AF_INET6, "v6", lambda i: f"{p6}{i + 2:x}"),
                        (socket.AF_INET, "v4", lambda i: f"{p4}{(i + 2) // 250}.{(i + 2) % 250 + 1}")):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    ok, refused, t = 0, {}, time.time()
    for i in range(n):
        try:
            s.sendto(b"x", (addr(i), 9))
            ok += 1
        except OSError as e:
            refused[e.strerror] = refused.get(e.strerror, 0) + 1
    say(name, "sent", ok, "of", n, "in", f"{(time.time() - t) * 1000:.1f}ms", "refused", refused)
say("done")
time.sleep(600)
