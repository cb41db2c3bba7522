#!/usr/bin/python3
# A host-only UDP-Lite and UDP service on 127.0.0.1 and ::1 (<port>): logs what it receives.
import socket, sys, select
port, logf = int(sys.argv[1]), sys.argv[2]
socks = []
for proto in (17, 136):
    for fam, addr in [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port))]:
        s = socket.socket(fam, socket.SOCK_DGRAM, proto); s.bind(addr); socks.append(s)
out = open(logf, "a", buffering=1)
out.write("listening\n")
while True:
    for s in select.select(socks, [], [], 1)[0]:
        data, peer = s.recvfrom(2048)
        out.write(f"got {data.decode(errors='replace')!r} from {peer[0]}\n")
