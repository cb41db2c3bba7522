#!/usr/bin/python3
# Red team 44: a host loopback service (in the stack's namespace): TCP on 127.0.0.1 and ::1 and
# UDP on 127.0.0.1 at <port>; writes every connection or datagram it gets to <log>.
import select, socket, sys

port, log = int(sys.argv[1]), sys.argv[2]
out = open(log, "a", buffering=1)
socks = []
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    t = socket.socket(fam, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.setsockopt(socket.IPPROTO_TCP, 23, 16)  # TCP_FASTOPEN (server side)
    t.bind((addr, port))
    t.listen(16)
    socks.append(t)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", port))
socks.append(u)
out.write("listening\n")
while True:
    r, _, _ = select.select(socks, [], [], 1)
    for s in r:
        if s.type == socket.SOCK_DGRAM:
            d, a = s.recvfrom(65536)
            out.write(f"udp {d!r}\n")
        else:
            c, a = s.accept()
            c.settimeout(1)
            try:
                d = c.recv(4096)
            except Exception:
                d = b""
            out.write(f"tcp {a} {d!r}\n")
            c.close()
