#!/usr/bin/python3
# Red team 39: hold open file descriptions (struct file, counted against the host-wide
# fs.file-max) far past the agent's processes x openFiles limits. Each mmap(2) of a file keeps
# its struct file alive after the descriptor is closed, and a process may hold vm.max_map_count
# (65,530) mappings: RLIMIT_NOFILE bounds descriptors, not open files.
# Usage: filepin.py <dir> <procs> <maps per proc> <hold seconds>
import ctypes, os, sys, time
d, procs, maps, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
out = open(f"{d}/filepin.log", "a", buffering=1)
def say(*a): out.write("%.1f " % time.time() + " ".join(str(x) for x in a) + "\n")
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
target = os.path.abspath(__file__)
say("start", procs, "procs", maps, "maps each, nofile", os.sysconf("SC_OPEN_MAX"))
kids = []
for i in range(procs):
    pid = os.fork()
    if pid == 0:
        n = 0
        err = ""
        try:
            for _ in range(maps):
                fd = os.open(target, os.O_RDONLY)
                a = libc.mmap(None, 4096, 1, 2, fd, 0)  # PROT_READ, MAP_PRIVATE
                os.close(fd)
                if a is None or a == ctypes.c_void_p(-1).value:
                    err = "mmap errno %d" % ctypes.get_errno()
                    break
                n += 1
        except OSError as e:
            err = str(e)
        say("proc", i, "holds", n, "mapped files", err)
        time.sleep(hold)
        os._exit(0)
    kids.append(pid)
for k in kids: os.waitpid(k, 0)
say("done")
time.sleep(3600)
