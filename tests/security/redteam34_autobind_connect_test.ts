/**
 * Red team 34, `--net host` under the bind guard (adcaf5b): every port of the host's ephemeral
 * range taken WITHOUT bind(2).
 *
 * The guard is a cgroup program on `BPF_CGROUP_INET4_BIND`/`INET6_BIND`: it runs on bind(2)
 * only. listen(2) on a socket that was never bound makes the kernel choose a port itself
 * (`inet_csk_get_port(sk, 0)`), and no cgroup hook runs there; the guard's own comment names
 * this path and judges it harmless ("a socket that listens unbound gets a port from the
 * ephemeral range, where a broker must not listen"). Held from eight processes (RLIMIT_NOFILE is
 * per process; 256 processes of 4,096 descriptors are allowed), retrying until the kernel has
 * none left (`rt34_fixtures/autobind.pl fill`, ~25 s), such sockets take EVERY port of
 * `ip_local_port_range`, 28,232 of 28,232. Red team 26 stopped 16 short with bind(2) and saw
 * connect() still work; with the last port held, connect() has no source port left
 * (EADDRNOTAVAIL) and bind(port 0) has none either (EADDRINUSE): no process of the network
 * namespace (the host's, for a `--net host` agent) can open a new TCP connection.
 *
 * The stack runs in a network namespace of its own, so the attack touches nothing else on this
 * machine. Passes when the defence holds: while the agent holds the range, the operator's
 * `cotal send` reaches the broker, a host process can still bind port 0 (what every listener on
 * a free port does: the auth service, each `--net host` or deno-only agent's loopback relay),
 * and a new `--net host` agent comes up.
 *
 * Observed 2026-12-05 (kernel 6.18, root): the agent held 28,211 of 28,232 ports (the rest are
 * the source ports of the stack's own connections, which connect() may share, so `cotal send`
 * still worked); bind(port 0) on the host failed with EADDRINUSE and `cotal spawn --net host`
 * of a sibling failed. In a bare namespace (no connections) all 28,232 were taken and connect()
 * failed too (EADDRNOTAVAIL).
 */
import assert from "node:assert/strict";
import { netnsStack, waitFull } from "./_netns_stack.ts";

Deno.test({
  name:
    "red team 34 - a --net host agent that listens on unbound sockets does not take every ephemeral port and cut the host's TCP connects",
  ignore: Deno.uid() !== 0,
  async fn() {
    const s = await netnsStack("conn", {
      team: "rt34",
      files: ["autobind.pl"],
      log: "autobind.log",
    });
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const bob = await s.cotal(
        ["spawn", "--agent", "program", "--name", "bob", "--", "/bin/sleep", "900"],
      );
      assert.equal(bob.code, 0, bob.out);
      const m = await s.spawnHostAgent("autobind.pl", [
        `${s.work}/a`,
        "fill",
      ]);
      assert.equal(m.code, 0, m.out);
      const held = await waitFull(s.work);
      const log = await s.readLog();
      console.log(log.trim());
      assert.match(log, /bind refused: Operation not permitted/, "the agent runs under the guard");
      console.log("ports the agent holds:", held);
      const probe = await s.inNs([
        "/usr/bin/perl",
        "-MSocket",
        "-e",
        'socket(my $c, PF_INET, SOCK_STREAM, 0); connect($c, pack_sockaddr_in($ARGV[0], inet_aton("127.0.0.1"))) ? print "connect ok\\n" : print "connect: $!\\n"; socket(my $b, PF_INET, SOCK_STREAM, 0); bind($b, pack_sockaddr_in(0, inet_aton("127.0.0.1"))) ? print "bind0 ok\\n" : print "bind0: $!\\n";',
        s.port,
      ]);
      console.log("a host process, outside the agent:", probe.out.trim());
      const send = await s.cotal(
        ["send", "--as", "alice", "--to", "local.bob", "hello"],
        60_000,
      );
      console.log("cotal send:", send.code, send.out.trim().slice(-300));
      // A sibling on the host's network is relayed through a loopback port of its own (port 0).
      const v = await s.cotal(
        [
          "spawn",
          "--agent",
          "program",
          "--name",
          "victim",
          "--net",
          "host",
          "--",
          "/bin/sleep",
          "600",
        ],
        90_000,
      );
      console.log("cotal spawn victim:", v.code, v.out.trim().slice(-300));
      assert.match(probe.out, /connect ok/, "a host process can still open a TCP connection");
      assert.match(probe.out, /bind0 ok/, "a host process can still listen on a port of its own");
      assert.equal(send.code, 0, `cotal send failed while the ports were held: ${send.out}`);
      assert.equal(v.code, 0, `a new spawn failed while the ports were held: ${v.out}`);
    } finally {
      await s.close();
    }
  },
});
