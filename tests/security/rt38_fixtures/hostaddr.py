#!/usr/bin/python3
# Red team 38: a --net host agent reaches host listeners bound to the wildcard address through
# the host's own non-loopback addresses, which the connect guard does not treat as loopback.
#
# Usage: hostaddr.py <dir> <tcp port> <udp port> <addr> [<addr> ...]
# For each address: a TCP connect + send, and a UDP sendto (with SO_BROADCAST, so a directed
# broadcast address is tried too). Results go to <dir>/hostaddr.log.
import socket, sys, time
d, tport, uport, addrs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
out = open(f"{d}/hostaddr.log", "a", buffering=1)
def say(*a): out.write(" ".join(str(x) for x in a) + "\n")
for a in addrs:
    fam = socket.AF_INET6 if ":" in a else socket.AF_INET
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect((a, tport))
        s.sendall(f"rt38 tcp via {a}\n".encode())
        say("tcp", a, "connected+sent")
        s.close()
    except OSError as e:
        say("tcp", a, "refused:", e.strerror or e)
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM)
        if fam == socket.AF_INET:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        s.sendto(f"rt38 udp via {a}".encode(), (a, uport))
        say("udp", a, "sent")
    except OSError as e:
        say("udp", a, "refused:", e.strerror or e)
say("done")
time.sleep(600)
