#!/usr/bin/python3
# Red team 41: a host-side UDP service that counts what reaches it. Binds each <addr> on <port>
# (IPv6 ones v6-only) and, for <secs> seconds, counts every datagram by the tag before its first
# ':' (the agent tags each phase). Prints "tag count" lines, then "done".
# Usage: counter.py <port> <secs> <addr>...
import select, socket, sys, time
port, secs, addrs = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
socks = []
for a in addrs:
    fam = socket.AF_INET6 if ":" in a else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: count, do not drop
    s.setblocking(False)
    s.bind((a, port))
    socks.append(s)
print("listening", flush=True)
counts = {}
end = time.time() + secs
while time.time() < end:
    r, _, _ = select.select(socks, [], [], 0.2)
    for s in r:
        while True:
            try:
                d = s.recv(2048)
            except BlockingIOError:
                break
            tag = d.split(b":", 1)[0].decode(errors="replace")[:16]
            counts[tag] = counts.get(tag, 0) + 1
for t, n in sorted(counts.items()):
    print(t, n, flush=True)
print("done", flush=True)
