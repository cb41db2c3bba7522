#!/usr/bin/python3
# Red team 40 (copy of red team 38's): a host service bound to the wildcard address (an operator's dev server, database,
# a container's published port), IPv4 and IPv6, TCP and UDP. Logs what reaches it.
# Usage: wild_listener.py <tcp port> <udp port> <log>
import socket, sys, threading
tport, uport, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
out = open(log, "a", buffering=1)
lock = threading.Lock()
def say(m):
    with lock: out.write(m + "\n")
def tcp(fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6: s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind(addr); s.listen(64)
    while True:
        c, peer = s.accept()
        c.settimeout(2)
        try: data = c.recv(200)
        except OSError: data = b""
        say(f"got tcp from {peer[0]}: {data.decode(errors='replace').strip()}")
        c.close()
def udp(fam, addr):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6: s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind(addr)
    while True:
        data, peer = s.recvfrom(2000)
        say(f"got udp from {peer[0]}: {data.decode(errors='replace').strip()}")
for f in (tcp, udp):
    for fam, a in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        threading.Thread(target=f, args=(fam, (a, tport if f is tcp else uport)), daemon=True).start()
say("listening")
threading.Event().wait()
