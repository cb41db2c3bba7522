#!/usr/bin/python3
# Red team 41: a --net host agent sends UDP to the host's port 53 past the connect guard's
# per-packet count of loopback UDP (64 per 2 s), in tagged phases of <secs> seconds each:
#   plain   connected to <resolver>:53, one datagram per send (the counted baseline)
#   gso     connected to <resolver>:53 with UDP_SEGMENT: one packet on the loopback carries up
#           to 64 datagrams, split only on the receiving socket
#   mc4     connected to 224.0.0.1:53 (all hosts): the kernel loops a copy of each multicast
#           datagram back to this host's own wildcard listeners through the outgoing device
#   mc6     the same to ff02::1%<ifname>:53
# Usage: udp_bypass.py <dir> <resolver> <ifname> <secs> <phase>...; results to <dir>/bypass.log.
import socket, sys, time
d, resolver, ifname, secs, phases = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:]
out = open(f"{d}/bypass.log", "a", buffering=1)
SOL_UDP, UDP_SEGMENT = 17, 103
SEG = 32

def run(tag, fam, dest, gso=False):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    try:
        s.connect(dest)
    except OSError as e:
        out.write(f"{tag}: connect refused: {e.strerror}\n"); return
    payload = (tag + ":").encode().ljust(SEG, b"x")
    if gso:
        try:
            s.setsockopt(SOL_UDP, UDP_SEGMENT, SEG)
        except OSError as e:
            out.write(f"{tag}: UDP_SEGMENT refused: {e.strerror}\n"); return
        payload = payload * 64
    s.setblocking(False)
    sent = err = 0
    errs = {}
    end = time.time() + secs
    while time.time() < end:
        for _ in range(200):
            try:
                s.send(payload); sent += 1
            except OSError as e:
                err += 1; errs[e.strerror] = errs.get(e.strerror, 0) + 1
        time.sleep(0.001)
    per = 64 if gso else 1
    out.write(f"{tag}: sends {sent} ok ({sent * per} datagrams), {err} failed {errs}\n")
    s.close()
    time.sleep(2.2)  # the next phase starts in a fresh window

for p in phases:
    if p == "plain":
        run("plain", socket.AF_INET, (resolver, 53))
    elif p == "gso":
        run("gso", socket.AF_INET, (resolver, 53), gso=True)
    elif p == "mc4":
        run("mc4", socket.AF_INET, ("224.0.0.1", 53))
    elif p == "mc6":
        run("mc6", socket.AF_INET6, ("ff02::1", 53, 0, socket.if_nametoindex(ifname)))
out.write("done\n")
time.sleep(600)
