#!/usr/bin/python3
# Red team 42: an unprivileged host process (another user's service, another agent) asks for
# <n> IPv6 flow labels, one per socket; prints "got K of N".
import random, socket, struct, sys
n = int(sys.argv[1])
# Labels of its own each run: an exclusive label lingers 6 s after its socket (expires below),
# so a second run asking the same ones within that time would be refused its own leftovers.
base = random.randrange(0x10000, 0xfff00 - n)
got, socks = 0, []
for i in range(n):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); socks.append(s)
    r = (socket.inet_pton(socket.AF_INET6, "::1") + struct.pack(">I", base + i) +
         struct.pack("=BBHHHI", 0, 1, 1, 0, 6, 0))
    try:
        s.setsockopt(socket.IPPROTO_IPV6, 32, r); got += 1
    except OSError:
        pass
print(f"got {got} of {n}", flush=True)
