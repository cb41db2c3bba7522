#!/usr/bin/python3
# Red team 37: UDP-Lite (IPPROTO_UDPLITE, 136) past the connect guard of a --net host agent.
#
# The guard (connect_guard.ts) refuses loopback connects and unconnected UDP sends through the
# cgroup hooks INET4/6_CONNECT and UDP4/6_SENDMSG. The kernel runs the connect hook through the
# protocol's pre_connect, which UDP and TCP have and UDP-Lite does not, and the sendmsg hook
# only for a send without a connected peer. So a UDP-Lite socket connects to any loopback port
# and then sends there unchecked. It reaches UDP-Lite listeners only (IP protocol 136).
#
# Usage: udplite.py <dir> <port>
import socket, sys, time
d, port = sys.argv[1], int(sys.argv[2])
out = open(f"{d}/udplite.log", "a", buffering=1)
def say(*a): out.write(" ".join(str(x) for x in a) + "\n")
for proto, name in [(17, "udp"), (136, "udplite")]:
    for fam, addr in [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port, 0, 0))]:
        tag = f"{name}/{'v4' if fam == socket.AF_INET else 'v6'}"
        try:
            s = socket.socket(fam, socket.SOCK_DGRAM, proto)
            s.sendto(f"rt37 sendto {tag}".encode(), addr)
            say(tag, "sendto: sent")
        except OSError as e:
            say(tag, "sendto:", e.strerror)
        try:
            s = socket.socket(fam, socket.SOCK_DGRAM, proto)
            s.connect(addr)
            s.send(f"rt37 connected {tag}".encode())
            say(tag, "connect+send: sent")
        except OSError as e:
            say(tag, "connect+send:", e.strerror)
say("done")
time.sleep(600)
