#!/bin/bash
# A hostile program agent, spawned through the real supervisor: every way it knows out of its
# sandbox, at a sibling, at the host and at the supervisor. Each attempt prints "@@attempt
# <name>" and what it got; the test decides from the host side whether the asset was reached.
# Usage: _sandbox_attacks.sh <targets file>, which sets ROOT OTHER_ROOT PROJECT SIBLING_PID
# SUPERVISOR_PID HOST_PORT HOST_IPS BROKER_PORT AGENT_PORT ABSTRACT.
. "$1"
exec 2>&1

attempt() {
  echo "@@attempt $1"
  shift
  timeout 20 "$@" 2>&1 | head -c 3000
  echo
}

# perl's syscall(): refused calls print "rc=-1 errno=<text>" (numbers passed as numbers).
SC='my @a = map { /^0x/ ? hex($_) : /^-?\d+$/ ? $_ + 0 : $_ } @ARGV; my $r = syscall($a[0], @a[1 .. $#a]); print "rc=$r errno=$!\n"'

# -- Privilege: who it is, what it holds ---------------------------------------------------
attempt "uid" id
attempt "capabilities" grep -E '^(Cap(Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status
attempt "core_pattern helper" sh -c 'printf "#!/bin/sh\ncp -r /  /tmp/x\n" > $HOME/h.sh;
  echo "|$HOME/h.sh" > /proc/sys/kernel/core_pattern && echo WROTE; cat /proc/sys/kernel/core_pattern'
attempt "sysctl write" sh -c 'echo 17 > /proc/sys/kernel/panic && echo WROTE'
attempt "sysrq trigger" sh -c 'echo h > /proc/sysrq-trigger && echo WROTE'
attempt "mount a tmpfs" mount -t tmpfs none /tmp
attempt "new user namespace" unshare -U id
attempt "new mount namespace as root of a user namespace" unshare -Urm sh -c 'mount -t tmpfs x /mnt && echo MOUNTED'
attempt "unshare by syscall" perl -e "$SC" 272 0x10000000
attempt "clone3" perl -e "$SC" 435 0 0
attempt "setns into pid 1" sh -c 'nsenter -t 1 -m -p id'
attempt "setuid binary su" sh -c 'echo | su -c id root'
attempt "setuid binary mount" sh -c 'ls -l /usr/bin/mount; /usr/bin/mount -t proc proc /mnt && echo MOUNTED'
attempt "chroot" perl -e "$SC" 161 /
attempt "ptrace pid 1" sh -c 'cat /proc/1/environ | tr "\0" "\n" | head -3; cat /proc/1/mem | head -c 10 | od -c | head -2'
attempt "kernel keyring" perl -e "$SC" 250 0 0 0
attempt "bpf" perl -e "$SC" 321 0 0 0
attempt "perf events" perl -e "$SC" 298 0 0 -1 -1 0
attempt "io_uring" perl -e "$SC" 425 8 0
attempt "kernel AIO contexts" perl -e "$SC" 206 128 0
attempt "raw packet socket" perl -e "$SC" 41 17 3 0
# Netlink user sockets queue messages between each other in kernel memory no cgroup pays for.
attempt "netlink usersock" perl -e "$SC" 41 16 3 2
attempt "netlink route" perl -e "$SC" 41 16 3 0
attempt "mknod a disk" sh -c 'mknod $HOME/sda b 8 0 && echo MADE; ls -l $HOME/sda'
attempt "devices" sh -c 'ls /dev; head -c 16 /dev/mem; head -c 16 /dev/kmsg; ls /dev/sd* /dev/vd* 2>&1'
attempt "every pty of the host" perl -e 'my @p; while (@p < 4000 && open(my $f, "+<", "/dev/ptmx")) { push @p, $f } print "ptys: ", scalar(@p), "\n"'
attempt "core dump" sh -c 'ulimit -c unlimited 2>&1; ulimit -c; sh -c "kill -SEGV \$\$"; ls core* 2>&1'

# -- The filesystem: only what an agent needs is there -------------------------------------
attempt "the state root" sh -c "ls -la '$ROOT' '$ROOT/secrets' '$ROOT/secrets/auth' 2>&1; cat '$ROOT'/secrets/auth/* 2>&1"
attempt "the root's agents" sh -c "ls '$ROOT/agents' 2>&1; cat '$ROOT'/agents/*/launch.json 2>&1"
attempt "another Cotal root" sh -c "cat '$OTHER_ROOT/secrets/auth/seed.json' 2>&1; ls '$OTHER_ROOT' 2>&1"
attempt "another project" sh -c "cat '$PROJECT/secret.txt' 2>&1; ls '$PROJECT' 2>&1"
attempt "/etc/shadow and host keys" sh -c 'cat /etc/shadow /etc/gshadow /etc/ssh/ssh_host_*_key 2>&1 | head -5; ls /etc'
attempt "the operator's home" sh -c 'ls -la /root 2>&1; cat /root/.bash_history /root/.npmrc 2>&1 | head -3'
attempt "search everything" sh -c 'grep -r -a -o -h "COTALMARK[A-Za-z0-9]*" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr 2>/dev/null | head -5; echo searched'
attempt "poison the runner's code" sh -c 'for f in $(find / -name agent.ts -path "*cmd*" 2>/dev/null | head -1); do echo "// x" >> $f && echo WROTE $f; done; echo tried'
# The shared parts of the module cache (the npm packages, the runner's transpiled code) are the
# host's, read-only; the rest of DENO_DIR is the agent's own tmpfs (Deno's SQLite caches), so a
# file made there must never appear in the host's cache.
attempt "poison the module cache" sh -c 'for d in "$DENO_DIR/npm/registry.npmjs.org" $(find "$DENO_DIR/gen" -type d -name lib 2>/dev/null | head -1); do touch "$d/poison" && echo WROTE $d; done; echo tried'
attempt "a file in its own cache dir" sh -c 'echo x > "$DENO_DIR/cotal-poison" && echo PRIVATE; echo tried'
attempt "the operator's module cache" sh -c 'ls -a "$DENO_DIR"; find "$DENO_DIR" -name "*.js" -path "*/gen/*" | grep -v -e "/gen/file.*/cmd/" -e "/gen/file.*/lib/" | head -5; echo listed'
attempt "rewrite its own launch file" sh -c 'echo "{}" > "$COTAL_LAUNCH" && echo WROTE; ls -l "$COTAL_LAUNCH"'
attempt "write outside its dirs" sh -c 'touch /x /usr/x /etc/x /run/cotal/x 2>&1; echo tried'

# -- Siblings and the supervisor -------------------------------------------------------------
attempt "inherited descriptors" ls -l /proc/self/fd/
attempt "processes it can see" sh -c 'ls /proc | grep -E "^[0-9]+$" | tr "\n" " "'
attempt "signal the sibling" sh -c "kill -9 $SIBLING_PID && echo KILLED"
attempt "signal the supervisor" sh -c "kill -STOP $SUPERVISOR_PID && echo STOPPED"
attempt "type into its terminal" perl -e 'my $c = "x"; my $r = ioctl(STDIN, 0x5412, $c); print $r ? "INJECTED\n" : "refused: $!\n"'
attempt "junk on the control channel" sh -c 'head -c 100000 /dev/urandom | timeout 3 socat - UNIX-CONNECT:/run/cotal/control.sock 2>&1 || perl -MIO::Socket::UNIX -e "my \$s = IO::Socket::UNIX->new(Peer => q{/run/cotal/control.sock}) or die qq{no: \$!\n}; print \$s q{x} x 100000; print qq{sent\n}"'
attempt "hold the relay open" perl -MIO::Socket::UNIX -MIO::Select -e 'my @s; for (1..64) { my $s = IO::Socket::UNIX->new(Peer => "/run/cotal/broker.sock"); push @s, $s if $s } sleep 2; my $n = 0; for my $s (@s) { my $b; $n++ if IO::Select->new($s)->can_read(0.05) && sysread($s, $b, 4) && $b eq "INFO" } print scalar(@s), " connected, $n served\n"'

# -- The network ---------------------------------------------------------------------------
attempt "a host loopback service" bash -c "echo hello > /dev/tcp/127.0.0.1/$HOST_PORT && echo CONNECTED"
attempt "the broker's host port" bash -c "echo > /dev/tcp/127.0.0.1/$BROKER_PORT && echo CONNECTED"
attempt "the host's addresses" bash -c "for ip in $HOST_IPS; do timeout 3 bash -c \"echo > /dev/tcp/\$ip/$HOST_PORT\" && echo CONNECTED \$ip; done; echo tried"
attempt "a UDP socket" perl -MSocket -e 'socket(my $s, PF_INET, SOCK_DGRAM, 0) ? print "OPENED\n" : print "refused: $!\n"'
attempt "its interfaces" sh -c 'cat /proc/net/dev | tail -n +3 | cut -d: -f1'
attempt "the broker through its relay" bash -c 'exec 3<>/dev/tcp/127.0.0.1/4222 && head -c 4 <&3 && echo'

# -- Limits (the spawn set processes=64, tmp=8M, home=16M, fileSize=16M) ---------------------
attempt "fork bomb" perl -e 'my @k; for (1 .. 300) { my $p = fork; last unless defined $p; if (!$p) { sleep 30; exit 0 } push @k, $p } print "children: ", scalar(@k), "\n"; kill "KILL", @k; 1 while wait != -1'
attempt "fill /tmp" sh -c 'dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1; rm -f /tmp/fill'
attempt "fill its home" sh -c 'dd if=/dev/zero of=$HOME/fill bs=1M count=64 2>&1; rm -f $HOME/fill'
attempt "fill /dev/shm" sh -c 'dd if=/dev/zero of=/dev/shm/fill bs=1M count=64 2>&1; rm -f /dev/shm/fill'
attempt "one huge file" sh -c 'dd if=/dev/zero of=./huge bs=1M count=64 2>&1; ls -l ./huge; rm -f ./huge'
attempt "memory" sh -c 'perl -e "my @a; for (1..40) { push @a, q{x} x (64*1024*1024) } print qq{ALLOCATED 2.5G\n}"; echo "exit $?"'

# -- Listen where the host might connect (checked from the host while it waits) ------------
perl -MIO::Socket::INET -e 'my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $ARGV[0], Listen => 5, ReuseAddr => 1) or die; while (my $c = $l->accept) { print $c "AGENT-LISTENER\n"; close $c }' "$AGENT_PORT" &
perl -MIO::Socket::UNIX -e 'my $l = IO::Socket::UNIX->new(Local => "\0$ARGV[0]", Listen => 5) or die; while (my $c = $l->accept) { print $c "AGENT-ABSTRACT\n"; close $c }' "$ABSTRACT" &
sleep 1
echo "@@end"
sleep 600
