#!/usr/bin/python3
# Red team 42: a host-side DNS-over-TCP service (what systemd-resolved, dnsmasq or BIND serve on
# port 53 beside UDP). Listens on <addr>:<port> (TCP) for <secs> seconds, reads every
# length-prefixed DNS message on every connection and counts them by the tag in the query's
# first label ("<tag>-<n>"); tracks how many connections it holds at once. Prints "tag count"
# lines, "bytes N", "conns_max N", "conns_total N", then "done".
# Usage: tcp_dns_host.py <port> <secs> <addr>
import select, socket, sys, time
port, secs, addr = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
ls = socket.socket(fam, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((addr, port))
ls.listen(4096)
ls.setblocking(False)
print("listening", flush=True)
conns = {}  # sock -> pending bytes
counts = {}
total_bytes = 0
conns_max = conns_total = 0
end = time.time() + secs
while time.time() < end:
    r, _, _ = select.select([ls, *conns.keys()], [], [], 0.2)
    for s in r:
        if s is ls:
            while True:
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    break
                c.setblocking(False)
                conns[c] = b""
                conns_total += 1
            conns_max = max(conns_max, len(conns))
            continue
        try:
            d = s.recv(1 << 20)
        except (BlockingIOError, ConnectionResetError):
            d = None
        if not d:
            if d == b"":
                conns.pop(s, None)
                s.close()
            continue
        total_bytes += len(d)
        buf = conns[s] + d
        while len(buf) >= 2:
            n = int.from_bytes(buf[:2], "big")
            if len(buf) < 2 + n:
                break
            msg, buf = buf[2:2 + n], buf[2 + n:]
            # header 12 bytes, then the first label: length byte, "<tag>-<n>"
            if n > 13:
                lab = msg[13:13 + msg[12]].split(b"-", 1)[0].decode(errors="replace")[:16]
                counts[lab] = counts.get(lab, 0) + 1
        conns[s] = buf
for t, n in sorted(counts.items()):
    print(t, n, flush=True)
print("bytes", total_bytes, flush=True)
print("conns_max", conns_max, flush=True)
print("conns_total", conns_total, flush=True)
print("done", flush=True)
