#!/usr/bin/python3
# Red team 44: a --net host agent tries to reach a host loopback port that is not its relay by
# ways other than connect(2): TCP Fast Open (sendto with MSG_FASTOPEN, v4, v6, v4-mapped v6),
# TCP_FASTOPEN_CONNECT, UDP sendto/sendmsg/sendmmsg-style to the port, and other 127/8 addresses.
# Usage: tfo_dial.py <dir> <port> <log>
import socket, sys

d, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = open(f"{d}/{log}", "a", buffering=1)
MSG_FASTOPEN = 0x20000000


def attempt(name, fn):
    try:
        r = fn()
        out.write(f"{name}: sent {r}\n")
    except Exception as e:
        out.write(f"{name}: refused {e!r}\n")


def tfo(fam, addr, tag):
    def go():
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(2)
        return s.sendto(f"tfo-{tag}".encode(), MSG_FASTOPEN, addr)
    return go


def tfo_connect(fam, addr, tag):
    def go():
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, 30, 1)  # TCP_FASTOPEN_CONNECT
        s.settimeout(2)
        s.connect(addr)
        return s.send(f"tfoc-{tag}".encode())
    return go


def udp(addr, tag, how):
    def go():
        s = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET, socket.SOCK_DGRAM)
        if how == "sendmsg":
            return s.sendmsg([f"udp-{tag}".encode()], [], 0, addr)
        if how == "connect":
            s.connect(addr)
            return s.send(f"udp-{tag}".encode())
        return s.sendto(f"udp-{tag}".encode(), addr)
    return go


attempt("tfo v4", tfo(socket.AF_INET, ("127.0.0.1", port), "v4"))
attempt("tfo v4 127.0.0.2", tfo(socket.AF_INET, ("127.0.0.2", port), "v4b"))
attempt("tfo v6", tfo(socket.AF_INET6, ("::1", port), "v6"))
attempt("tfo v4-mapped", tfo(socket.AF_INET6, ("::ffff:127.0.0.1", port), "mapped"))
attempt("tfo-connect v4", tfo_connect(socket.AF_INET, ("127.0.0.1", port), "v4"))
attempt("tfo-connect v6", tfo_connect(socket.AF_INET6, ("::1", port), "v6"))
attempt("udp sendto", udp(("127.0.0.1", port), "sendto", "sendto"))
attempt("udp sendmsg", udp(("127.0.0.1", port), "sendmsg", "sendmsg"))
attempt("udp connect", udp(("127.0.0.1", port), "connect", "connect"))
attempt("udp mapped", udp(("::ffff:127.0.0.1", port), "mapped", "sendto"))
out.write("done\n")
