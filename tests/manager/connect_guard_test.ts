/**
 * The connect guard of an agent on the host's network (`lib/manager/sandbox/connect_guard.ts`):
 * in its group, the loopback is closed for TCP connects and UDP sends but for the allowed ports
 * and DNS, by every spelling of a local address; other addresses are reached; and connections
 * are counted per window, so a connect/close loop cannot leave the host's ports in TIME_WAIT
 * (red team 36, `tests/security/redteam36_timewait_fill_test.ts`).
 *
 * Each probe runs in a network namespace of its own, with a second, non-loopback address on its
 * `lo` and listeners started before the shell joins the guarded group (which may bind nothing).
 */
import assert from "node:assert/strict";
import { probeCgroups } from "../../lib/manager/sandbox/cgroup.ts";
import {
  ADDRESS_POLL_MS,
  CONNECT_WINDOW_NS,
  guardConnects,
  HOST_NET_CONNECTS,
  HOST_NET_DNS_PACKETS,
  HOST_NET_UDP_DESTINATIONS,
  ownAddresses,
  refreshConnectGuards,
  releaseConnectGuard,
} from "../../lib/manager/sandbox/connect_guard.ts";
import { makeDir, removeDir } from "../../lib/manager/sandbox/libc.ts";

const asRoot = Deno.uid() === 0;
const canGuard = asRoot && probeCgroups()?.guardParent !== undefined;

// Listens on TCP ports 7001 (allowed) and 7002 (not) on every address, and UDP 7003.
const LISTENER = `
use Socket qw(:all);
for my $p (7001, 7002) {
  socket(my $s, PF_INET6, SOCK_STREAM, 0) or die; setsockopt($s, IPPROTO_IPV6, IPV6_V6ONLY, 0);
  setsockopt($s, SOL_SOCKET, SO_REUSEADDR, 1);
  bind($s, pack_sockaddr_in6($p, inet_pton(AF_INET6, "::"))) or die "bind $p: $!"; listen($s, 4096) or die;
  push @keep, $s;
}
socket(my $u, PF_INET6, SOCK_DGRAM, 0) or die; setsockopt($u, IPPROTO_IPV6, IPV6_V6ONLY, 0);
bind($u, pack_sockaddr_in6(7003, inet_pton(AF_INET6, "::"))) or die "bind 7003: $!";
# A resolver's UDP port, for the probes that send DNS.
socket(my $dns, PF_INET6, SOCK_DGRAM, 0) or die; setsockopt($dns, IPPROTO_IPV6, IPV6_V6ONLY, 0);
bind($dns, pack_sockaddr_in6(53, inet_pton(AF_INET6, "::"))) or die "bind 53: $!";
print "ready\\n"; $| = 1;
# Accept and close at once, so the prober's connects never back up.
my $rin = ''; vec($rin, fileno($_), 1) = 1 for @keep;
while (1) { select(my $r = $rin, undef, undef, undef); for (@keep) { if (vec($r, fileno($_), 1)) { accept(my $c, $_); close $c } } }
`;

// The probes' words: tcp(what, family, address) and udp(...) print one line per attempt,
// "<what> ok" or "<what> <errno>"; $v4/$v6 pack an address and a port.
const PROBE_SUBS = `
use Socket qw(:all); $| = 1;
sub tcp {
  my ($what, $fam, $addr) = @_;
  socket(my $c, $fam, SOCK_STREAM, 0) or return print "$what socket $!\\n";
  # A connect whose SYN is dropped gives up after a second (EINPROGRESS), not two minutes.
  setsockopt($c, SOL_SOCKET, SO_SNDTIMEO, pack("l!l!", 1, 0));
  print connect($c, $addr) ? "$what ok\\n" : $!{EINPROGRESS} ? "$what timeout\\n" : "$what $!\\n";
  close $c;
}
sub udp {
  my ($what, $fam, $addr) = @_;
  socket(my $c, $fam, SOCK_DGRAM, 0) or return print "$what socket $!\\n";
  setsockopt($c, SOL_SOCKET, SO_BROADCAST, 1);
  print defined(send($c, "x", 0, $addr)) ? "$what ok\\n" : "$what $!\\n";
}
my $v4 = sub { pack_sockaddr_in($_[1], inet_aton($_[0])) };
my $v6 = sub { pack_sockaddr_in6($_[1], inet_pton(AF_INET6, $_[0])) };
`;

const PROBE = `${PROBE_SUBS}
tcp("allowed", PF_INET, $v4->("127.0.0.1", 7001));
tcp("loopback", PF_INET, $v4->("127.0.0.1", 7002));
tcp("loopback-127.0.0.2", PF_INET, $v4->("127.0.0.2", 7002));
tcp("any", PF_INET, $v4->("0.0.0.0", 7002));
tcp("v6-loopback", PF_INET6, $v6->("::1", 7002));
tcp("v6-any", PF_INET6, $v6->("::", 7002));
tcp("v6-mapped", PF_INET6, $v6->("::ffff:127.0.0.1", 7002));
tcp("v6-mapped-any", PF_INET6, $v6->("::ffff:0.0.0.0", 7002));
tcp("remote", PF_INET, $v4->("10.253.9.1", 7002));
tcp("remote-v6-mapped", PF_INET6, $v6->("::ffff:10.253.9.1", 7002));
udp("udp-loopback", PF_INET, $v4->("127.0.0.1", 7003));
udp("udp-v6-loopback", PF_INET6, $v6->("::1", 7003));
udp("udp-dns", PF_INET, $v4->("127.0.0.1", 53));
udp("udp-remote", PF_INET, $v4->("10.253.9.1", 7003));
`;

// Connects and closes to the remote address until refused (at most 500), twice, a window apart.
const CHURN = `
use Socket qw(:all); use Time::HiRes qw(sleep); $| = 1;
sub churn {
  my $n = 0;
  for (1..500) {
    socket(my $c, PF_INET, SOCK_STREAM, 0) or last;
    connect($c, pack_sockaddr_in(7002, inet_aton("10.253.9.1"))) or do { print "stopped: $!\\n"; last };
    close $c; $n++;
  }
  print "opened $n\\n";
}
churn(); sleep($ARGV[0]); churn();
`;

// The probe's namespace A: its loopback, the listener on it, a route making 10.41.0.0/16 local,
// and a veth to a namespace B of its own ("remote": 10.253.9.1, .2 and fd53::1, the same
// listener), so a remote address is reached over a device and not the loopback.
const NETWORK = [
  "ip link set lo up",
  "ip route add local 10.41.0.0/16 dev lo",
  "ip link add cg0 type veth peer name cg1",
  "unshare -n sleep 60 & REMOTE=$!",
  "sleep 0.1",
  "ip link set cg1 netns $REMOTE",
  "ip addr add 10.253.9.10/24 dev cg0",
  "ip -6 addr add fd53::10/64 dev cg0 nodad",
  "ip link set cg0 up",
  "nsenter --net=/proc/$REMOTE/ns/net sh -c 'ip link set lo up; ip addr add 10.253.9.1/24 dev cg1; " +
  "ip addr add 10.253.9.2/24 dev cg1; ip -6 addr add fd53::1/64 dev cg1 nodad; ip link set cg1 up'",
  'perl -e "$LISTENER" > /tmp/.cotal-connguard-$$ 2>&1 &',
  "LISTENER_PID=$!",
  'nsenter --net=/proc/$REMOTE/ns/net perl -e "$LISTENER" > /tmp/.cotal-connguard-r$$ 2>&1 &',
  "REMOTE_LISTENER=$!",
  // Waits (2 s at most) for both listeners' "ready".
  "for i in $(seq 1 40); do grep -q ready /tmp/.cotal-connguard-$$ && grep -q ready /tmp/.cotal-connguard-r$$ && break; sleep 0.05; done",
  "rm -f /tmp/.cotal-connguard-$$ /tmp/.cotal-connguard-r$$",
];
const NETWORK_DONE = "kill $LISTENER_PID $REMOTE_LISTENER $REMOTE";

async function inGuardedNs(
  script: string,
  args: string[],
  policy: Parameters<typeof guardConnects>[1],
  afterGuard?: () => void,
): Promise<string> {
  const parent = probeCgroups()!.guardParent!;
  const dir = `${parent}/cotal-connguard-${crypto.randomUUID().slice(0, 8)}`;
  assert.ok(makeDir(dir));
  try {
    guardConnects(dir, policy);
    afterGuard?.();
    const shell = [
      ...NETWORK,
      `echo $$ > ${dir}/cgroup.procs`,
      'perl -e "$PROBE" "$@"',
      NETWORK_DONE,
    ].join("\n");
    const out = await new Deno.Command("unshare", {
      args: ["-n", "/bin/sh", "-c", shell, "probe", ...args],
      env: { LISTENER, PROBE: script },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    return new TextDecoder().decode(out.stdout);
  } finally {
    releaseConnectGuard(dir);
    for (let i = 0; i < 40 && !removeDir(dir); i++) await new Promise((r) => setTimeout(r, 50));
  }
}

Deno.test({
  name:
    "connect guard - the loopback is closed by every spelling but for the allowed port and DNS; other addresses are reached",
  ignore: !canGuard,
  async fn() {
    const out = await inGuardedNs(PROBE, [], { loopbackPorts: [7001] });
    const eperm = "Operation not permitted";
    assert.equal(
      out,
      [
        "allowed ok",
        `loopback ${eperm}`,
        `loopback-127.0.0.2 ${eperm}`,
        `any ${eperm}`,
        `v6-loopback ${eperm}`,
        `v6-any ${eperm}`,
        `v6-mapped ${eperm}`,
        `v6-mapped-any ${eperm}`,
        "remote ok",
        "remote-v6-mapped ok",
        `udp-loopback ${eperm}`,
        `udp-v6-loopback ${eperm}`,
        "udp-dns ok",
        "udp-remote ok",
        "",
      ].join("\n"),
    );
  },
});

Deno.test({
  name:
    "connect guard - the same probe outside a guarded group reaches every listener (the refusals are the guard's)",
  ignore: !asRoot,
  async fn() {
    const out = await new Deno.Command("unshare", {
      args: [
        "-n",
        "/bin/sh",
        "-c",
        [...NETWORK, 'perl -e "$PROBE"', NETWORK_DONE].join("\n"),
      ],
      env: { LISTENER, PROBE },
      stdout: "piped",
    }).output();
    const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
    assert.ok(lines.length === 14 && lines.every((l) => l.endsWith(" ok")), lines.join("\n"));
  },
});

Deno.test({
  name:
    "connect guard - connections are counted per window: a connect/close loop is refused at the cap, and resumes in the next window",
  ignore: !canGuard,
  async fn() {
    const cap = 20;
    const out = await inGuardedNs(CHURN, [String(CONNECT_WINDOW_NS / 1e9 + 0.2)], {
      loopbackPorts: [],
      connects: cap,
    });
    assert.equal(
      out,
      `stopped: Operation not permitted\nopened ${cap}\nstopped: Operation not permitted\nopened ${cap}\n`,
    );
    // The frozen constants keep a real agent far from the 28,232 ports of the ephemeral range.
    const perMinute = (60e9 / CONNECT_WINDOW_NS + 1) * HOST_NET_CONNECTS;
    assert.ok(perMinute < 28_232 / 10, String(perMinute));
  },
});

// TCP connects to the allowed loopback port until refused (at most 100), then UDP connects.
const ALLOWED_CHURN = `
use Socket qw(:all); $| = 1;
my $n = 0;
for (1..100) {
  socket(my $c, PF_INET, SOCK_STREAM, 0) or last;
  connect($c, pack_sockaddr_in(7001, inet_aton("127.0.0.1"))) or do { print "stopped: $!\\n"; last };
  close $c; $n++;
}
print "tcp to the allowed port $n\\n";
my $u = 0;
for (1..100) {
  socket(my $c, PF_INET, SOCK_DGRAM, 0) or last;
  connect($c, pack_sockaddr_in(7003, inet_aton("10.253.9.1"))) or do { print "udp stopped: $!\\n"; last };
  close $c; $u++;
}
print "udp connects $u\\n";
`;

Deno.test({
  name:
    "connect guard - connects to an allowed loopback port are counted like any (red team 37's DNS churn); UDP connects to new destinations have a count of their own (red team 40's neighbour fill)",
  ignore: !canGuard,
  async fn() {
    const out = await inGuardedNs(ALLOWED_CHURN, [], { loopbackPorts: [7001], connects: 20 });
    assert.equal(
      out,
      "stopped: Operation not permitted\ntcp to the allowed port 20\n" +
        `udp stopped: Operation not permitted\nudp connects ${HOST_NET_UDP_DESTINATIONS}\n`,
    );
  },
});

// The host's own non-loopback addresses: the listener binds every address, as a dev server
// started with --host, a database, or docker-proxy does (red team 38).
const OWN_PROBE = `${PROBE_SUBS}
tcp("own", PF_INET, $v4->("10.253.9.1", 7002));
tcp("own-mapped", PF_INET6, $v6->("::ffff:10.253.9.1", 7002));
tcp("own-v6", PF_INET6, $v6->("fd53::1", 7002));
udp("own-udp", PF_INET, $v4->("10.253.9.1", 7003));
udp("own-broadcast", PF_INET, $v4->("10.253.9.255", 7003));
udp("limited-broadcast", PF_INET, $v4->("255.255.255.255", 7003));
udp("multicast", PF_INET, $v4->("224.0.0.251", 5353));
udp("multicast-v6", PF_INET6, $v6->("ff05::fb", 5353));
tcp("not-own", PF_INET, $v4->("10.253.9.2", 7002));
`;

// As Deno.networkInterfaces() describes a host with a LAN address and an IPv6 one.
const HOST_ADDRESSES = ownAddresses([
  {
    family: "IPv4",
    name: "eth0",
    address: "10.253.9.1",
    netmask: "255.255.255.0",
    scopeid: null,
    cidr: "10.253.9.1/24",
    mac: "",
  },
  {
    family: "IPv4",
    name: "lo",
    address: "127.0.0.1",
    netmask: "255.0.0.0",
    scopeid: null,
    cidr: "127.0.0.1/8",
    mac: "",
  },
  {
    family: "IPv6",
    name: "eth0",
    address: "fd53::1",
    netmask: "ffff:ffff:ffff:ffff::",
    scopeid: 0,
    cidr: "fd53::1/64",
    mac: "",
  },
]);

Deno.test({
  name:
    "connect guard - the host's own addresses, their broadcasts and multicast are closed as the loopback is; other addresses are reached",
  ignore: !canGuard,
  async fn() {
    const own = HOST_ADDRESSES;
    assert.equal(own.v4.length, 2, "the address and its subnet's broadcast; not the loopback");
    const out = await inGuardedNs(OWN_PROBE, [], { loopbackPorts: [], own });
    const eperm = "Operation not permitted";
    assert.equal(
      out,
      [
        `own ${eperm}`,
        `own-mapped ${eperm}`,
        `own-v6 ${eperm}`,
        `own-udp ${eperm}`,
        `own-broadcast ${eperm}`,
        `limited-broadcast ${eperm}`,
        `multicast ${eperm}`,
        `multicast-v6 ${eperm}`,
        "not-own ok",
        "",
      ].join("\n"),
    );
  },
});

Deno.test({
  name:
    "connect guard - an address the host gains after the guard was made is closed once the guards are refreshed",
  ignore: !canGuard,
  async fn() {
    const none = { v4: [], v6: [] };
    const before = await inGuardedNs(OWN_PROBE, [], { loopbackPorts: [], own: none });
    assert.match(before, /^own ok$/m, "the address was not the host's when the guard was made");
    const after = await inGuardedNs(
      OWN_PROBE,
      [],
      { loopbackPorts: [], own: none },
      () => refreshConnectGuards(HOST_ADDRESSES),
    );
    const eperm = "Operation not permitted";
    assert.match(after, new RegExp(`^own ${eperm}$`, "m"));
    assert.match(after, new RegExp(`^own-v6 ${eperm}$`, "m"));
    assert.match(after, new RegExp(`^own-broadcast ${eperm}$`, "m"));
    assert.match(after, /^not-own ok$/m);
    // The host's addresses are read again this often while a guard lives.
    assert.ok(ADDRESS_POLL_MS <= 5_000);
  },
});

// Local by route, not by the address list: a `local` route's range, this namespace's own veth
// address (not listed), then a remote address; TCP to the loopback's DNS port and UDP to its
// relay port (each allowed the other way only); and 100 datagrams through one connected socket
// to the loopback's DNS port.
const ROUTE_PROBE = `${PROBE_SUBS}
tcp("local-route", PF_INET, $v4->("10.41.3.3", 7002));
udp("local-route-udp", PF_INET, $v4->("10.41.3.3", 7002));
tcp("own-unlisted", PF_INET, $v4->("10.253.9.10", 7002));
tcp("own-unlisted-v6", PF_INET6, $v6->("fd53::10", 7002));
tcp("remote", PF_INET, $v4->("10.253.9.1", 7002));
tcp("dns-tcp", PF_INET, $v4->("127.0.0.1", 53));
udp("udp-to-tcp-port", PF_INET, $v4->("127.0.0.1", 7001));
socket(my $d, PF_INET, SOCK_DGRAM, 0) or die; connect($d, $v4->("127.0.0.1", 53)) or die "dns connect: $!";
my $n = 0;
for (1..100) { defined(send($d, "q", 0)) or do { print "dns stopped: $!\\n"; last }; $n++ }
print "dns sent $n\\n";
`;

Deno.test({
  name:
    "connect guard - every address the host's routes call local is closed by the loopback egress check, listed or not; the loopback takes TCP to the relay and UDP to DNS alone, counted per packet (red teams 40, 42)",
  ignore: !canGuard,
  async fn() {
    const none = { v4: [], v6: [] };
    const out = await inGuardedNs(ROUTE_PROBE, [], { loopbackPorts: [7001], own: none });
    const eperm = "Operation not permitted";
    assert.equal(
      out,
      [
        "local-route timeout",
        `local-route-udp ${eperm}`,
        "own-unlisted timeout",
        "own-unlisted-v6 timeout",
        "remote ok",
        `dns-tcp ${eperm}`,
        `udp-to-tcp-port ${eperm}`,
        `dns stopped: ${eperm}`,
        `dns sent ${HOST_NET_DNS_PACKETS}`,
        "",
      ].join("\n"),
    );
  },
});
