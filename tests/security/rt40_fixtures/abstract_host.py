#!/usr/bin/python3
# Red team 40: host services on abstract unix sockets (a desktop bus, an X server, a runtime's
# shim): a stream, a seqpacket and a datagram socket. Logs every connection, datagram and
# passed descriptor that reaches them. Usage: abstract_host.py <tag> <log>
import array, socket, sys, threading
tag, log = sys.argv[1], sys.argv[2]
out = open(log, "a", buffering=1)
lock = threading.Lock()
def say(m):
    with lock: out.write(m + "\n")
def conn(kind):
    s = socket.socket(socket.AF_UNIX, kind)
    s.bind(f"\0{tag}-{kind}"); s.listen(16)
    while True:
        c, _ = s.accept()
        c.settimeout(2)
        try: data = c.recv(200)
        except OSError: data = b""
        say(f"got {kind} connection: {data!r}")
        c.close()
def dgram():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(f"\0{tag}-dgram")
    while True:
        data, anc, _, peer = s.recvmsg(200, socket.CMSG_SPACE(16 * 4))
        fds = []
        for lvl, typ, d in anc:
            if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds += array.array("i", d[: len(d) - len(d) % 4]).tolist()
        say(f"got dgram from {peer!r}: {data!r} fds {fds}")
for k in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
    threading.Thread(target=conn, args=(k,), daemon=True).start()
threading.Thread(target=dgram, daemon=True).start()
say("listening")
threading.Event().wait()
