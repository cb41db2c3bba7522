#!/usr/bin/python3
# Red team 40: what a sandboxed agent tries across its boundary through the kernel: the host's
# abstract unix sockets (connect, seqpacket, sendto, a connected datagram socket, SCM_RIGHTS,
# autobind), signals and pidfds at pid 1 (bwrap, outside its Landlock domain), and syscalls the
# seccomp filter does not name (listmount/statmount of other mount namespaces, open_tree_attr,
# socketpair of other families, process_vm_readv, ptrace). Each line: "<attempt>: <result>".
# Usage: kprobe.py <dir> <tag> <mode>; results to <dir>/kprobe-<mode>.log.
import array, ctypes, ctypes.util, errno, os, signal, socket, struct, sys, time
d, tag, mode = sys.argv[1], sys.argv[2], sys.argv[3]
ifs = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().split("\n")[2:] if ":" in l]
out = open(f"{d}/kprobe-{mode}.log", "w", buffering=1)
def say(a, r): out.write(f"{a}: {r}\n")
def attempt(name, f):
    try: say(name, f() or "ok")
    except OSError as e: say(name, f"refused {errno.errorcode.get(e.errno, e.errno)}")
    except Exception as e: say(name, f"error {e!r}")
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if r < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return f"returned {r}"
say("interfaces", " ".join(ifs))
def stream(kind):
    def f():
        s = socket.socket(socket.AF_UNIX, kind); s.settimeout(2)
        s.connect(f"\0{tag}-{kind}"); s.send(b"agent " + mode.encode()); return "CONNECTED"
    return f
attempt("abstract stream connect", stream(socket.SOCK_STREAM))
attempt("abstract seqpacket connect", stream(socket.SOCK_SEQPACKET))
def dsend():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"agent sendto " + mode.encode(), f"\0{tag}-dgram"); return "SENT"
attempt("abstract dgram sendto", dsend)
def dconn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.connect(f"\0{tag}-dgram"); s.send(b"agent connected " + mode.encode()); return "SENT"
attempt("abstract dgram connect+send", dconn)
def rights():
    a, b = socket.socketpair()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendmsg([b"agent fd " + mode.encode()],
              [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [a.fileno()]))],
              0, f"\0{tag}-dgram"); return "SENT"
attempt("abstract dgram SCM_RIGHTS", rights)
def autobind():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    try: s.sendto(b"agent autobind " + mode.encode(), f"\0{tag}-dgram"); r = "SENT"
    except OSError as e: r = f"send refused {errno.errorcode.get(e.errno)}"
    return f"{r}, bound as {s.getsockname()!r}"
attempt("abstract dgram autobind", autobind)
def absbind():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(f"\0{tag}-dgram"); return "BOUND (took the host's name)"
attempt("bind the host's abstract name", absbind)
say("pid 1", open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode(errors="replace"))
say("processes", " ".join(sorted(p for p in os.listdir("/proc") if p.isdigit())))
attempt("kill(1, 0)", lambda: os.kill(1, 0))
attempt("kill(1, SIGTERM)", lambda: os.kill(1, signal.SIGTERM))
attempt("kill(-1, 0)", lambda: os.kill(-1, 0))
def pidfd():
    fd = sc(434, 1, 0)  # pidfd_open(1)
    n = int(fd.split()[1])
    r = [fd]
    try: sc(424, n, 0, 0, 0); r.append("pidfd_send_signal(0) ok")
    except OSError as e: r.append(f"pidfd_send_signal refused {errno.errorcode.get(e.errno)}")
    try: r.append("pidfd_getfd " + sc(438, n, 0, 0))
    except OSError as e: r.append(f"pidfd_getfd refused {errno.errorcode.get(e.errno)}")
    return "; ".join(r)
attempt("pidfd of pid 1", pidfd)
attempt("ptrace attach pid 1", lambda: sc(101, 16, 1, 0, 0))
def vmread():
    buf = ctypes.create_string_buffer(16)
    local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 16)
    remote = (ctypes.c_void_p * 2)(0x400000, 16)
    return sc(310, 1, local, 1, remote, 1, 0)
attempt("process_vm_readv pid 1", vmread)
# listmount(2) (458) of other mount namespaces: struct mnt_id_req {u32 size, spare; u64 mnt_id,
# param, mnt_ns_id}; LSMT_ROOT = ~0. Namespace ids are small sequence numbers.
def listmount(ns):
    req = struct.pack("IIQQQ", 32, 0, 0xFFFFFFFFFFFFFFFF, 0, ns)
    ids = (ctypes.c_uint64 * 64)()
    return int(sc(458, ctypes.c_char_p(req), ids, 64, 0).split()[1]), list(ids)
def lm_own():
    n, ids = listmount(0); return f"{n} mounts"
attempt("listmount own namespace", lm_own)
def lm_other():
    hits = []
    for ns in range(1, 200):
        try: n, _ = listmount(ns); hits.append(f"ns {ns}: {n} mounts")
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EPERM, errno.EINVAL): hits.append(f"ns {ns}: {errno.errorcode.get(e.errno)}")
    return "READ " + ", ".join(hits[:8]) if hits else "none readable"
attempt("listmount other namespaces 1-199", lm_other)
def sm_other():
    # statmount (457) of mount ids seen by no one here: STATMOUNT_MNT_POINT (0x10)
    req = struct.pack("IIQQQ", 32, 0, 0, 0x10, 0)
    got = []
    for mid in range(1, 400):
        r = struct.pack("IIQQQ", 32, 0, mid, 0x10, 0)
        buf = ctypes.create_string_buffer(4096)
        try: sc(457, ctypes.c_char_p(r), buf, 4096, 0); got.append(mid)
        except OSError: pass
    return f"statmount answered for {len(got)} mount ids: {got[:12]}"
attempt("statmount by mount id 1-399", sm_other)
attempt("open_tree_attr / (467)", lambda: sc(467, -100, ctypes.c_char_p(b"/"), 1, 0, 0))  # OPEN_TREE_CLONE
attempt("open_tree / (428)", lambda: sc(428, -100, ctypes.c_char_p(b"/"), 1))
for fam, name in ((40, "vsock"), (17, "packet"), (38, "alg"), (30, "tipc"), (16, "netlink"), (21, "rds")):
    def sp(fam=fam):
        sv = (ctypes.c_int * 2)()
        return sc(53, fam, 2, 0, sv)
    attempt(f"socketpair family {name}", sp)
attempt("socket vsock", lambda: socket.socket(40, socket.SOCK_STREAM) and "OPENED")
attempt("io_uring_setup", lambda: sc(425, 8, ctypes.create_string_buffer(120)))
attempt("keyctl", lambda: sc(250, 0, 0, 0))
attempt("userfaultfd", lambda: sc(323, 0))
attempt("unshare(CLONE_NEWUSER)", lambda: sc(272, 0x10000000))
try: say("sysvipc msg", open("/proc/sysvipc/msg").read().count("\n") - 1)
except OSError as e: say("sysvipc msg", f"refused {e}")
try:
    u = open("/proc/net/unix").read().split("\n")[1:]
    say("/proc/net/unix", f"{len([l for l in u if l])} sockets, {len([l for l in u if ' @' in l])} abstract, e.g. {[l.split()[-1] for l in u if len(l.split()) > 7][:4]}")
except OSError as e: say("/proc/net/unix", f"refused {e}")
say("done", "")
time.sleep(600)
