#!/usr/bin/python3
# Red team 40: a --net host agent tries to reach host listeners bound to the wildcard address
# through each address given: a TCP connect + send, and a UDP sendto.
# Usage: probe.py <dir> <tcp port> <udp port> <addr> [<addr> ...]; results to <dir>/probe.log.
# With the env-free argument "wait=<s>" before the addresses it first sleeps that long, and with
# "loop=<s>" it repeats the round every half second for that long (an address added later).
import socket, sys, time
d, tport, uport, rest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
opts = {k: float(v) for k, v in (a.split("=") for a in rest if "=" in a)}
addrs = [a for a in rest if "=" not in a]
out = open(f"{d}/probe.log", "a", buffering=1)
def say(*a): out.write(" ".join(str(x) for x in a) + "\n")
time.sleep(opts.get("wait", 0))
def round_(tag):
    for a in addrs:
        fam = socket.AF_INET6 if ":" in a else socket.AF_INET
        try:
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.settimeout(2)
            s.connect((a, tport))
            s.sendall(f"rt40 tcp via {a} {tag}\n".encode())
            say("tcp", a, "connected+sent", tag)
            s.close()
        except OSError as e:
            say("tcp", a, "refused:", e.strerror or e, tag)
        try:
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.sendto(f"rt40 udp via {a} {tag}".encode(), (a, uport))
            say("udp", a, "sent", tag)
            s.close()
        except OSError as e:
            say("udp", a, "refused:", e.strerror or e, tag)
end = time.time() + opts.get("loop", 0)
n = 0
while True:
    round_(f"r{n}")
    n += 1
    if time.time() >= end: break
    time.sleep(0.5)
say("done")
time.sleep(600)
