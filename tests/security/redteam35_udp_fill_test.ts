/**
 * Red team 35, `--net host` under the bind guard (adcaf5b) and the listen ban (5f1b4bb): every
 * UDP port of the host's ephemeral range taken with sendto(2) on unbound datagram sockets.
 *
 * The seccomp filter keeps an agent to stream sockets only in its own namespace (`streamOnly`);
 * on `--net host` datagram IP sockets are allowed. The bind guard runs on bind(2) only; a UDP
 * socket that sends before it is bound is given a port by the kernel (`inet_autobind` ->
 * `udp_v4_get_port(sk, 0)`), with no cgroup hook, and unlike TCP connects, unconnected UDP
 * sockets never share a port. The agent (`rt35_fixtures/connfill.pl udp`, eight processes of
 * ~3,900 sockets, far under its 256 x 4,096 descriptors) sends one datagram to 127.0.0.1:9 from
 * each fresh socket until sendto fails with EAGAIN.
 *
 * Passes when the defence holds: while the agent holds its sockets, a host process (outside the
 * agent) can still send a UDP datagram from a fresh socket (what every DNS lookup on the host
 * does: getaddrinfo's resolver connects a fresh UDP socket to the name server) and bind a UDP
 * port 0.
 *
 * The stack runs in a network namespace of its own (_netns_stack.ts).
 */
import assert from "node:assert/strict";
import { netnsStack, waitFull } from "./_netns_stack.ts";

const PROBE =
  'socket(my $u, PF_INET, SOCK_DGRAM, 0); if (connect($u, pack_sockaddr_in(53, inet_aton("127.0.0.1"))) && defined send($u, "q", 0)) { print "udp send ok\\n" } else { print "udp send: $!\\n" } socket(my $b, PF_INET, SOCK_DGRAM, 0); if (bind($b, pack_sockaddr_in(0, inet_aton("127.0.0.1")))) { print "udp bind0 ok\\n" } else { print "udp bind0: $!\\n" }';

Deno.test({
  name:
    "red team 35 - a --net host agent cannot take every UDP ephemeral port by sending from unbound sockets",
  ignore: Deno.uid() !== 0,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const s = await netnsStack("uf", { team: "rt35", files: ["connfill.pl"], log: "connfill.log" });
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const before = await s.inNs(["/usr/bin/perl", "-MSocket", "-e", PROBE]);
      console.log("a host process before the fill:", before.out.trim());
      assert.match(before.out, /udp send ok/);
      const m = await s.spawnHostAgent("connfill.pl", [
        `${s.work}/a`,
        "udp",
      ]);
      assert.equal(m.code, 0, m.out);
      const held = await waitFull(s.work, 240_000);
      const log = await s.readLog();
      console.log(log.trim());
      console.log("UDP ports the agent holds:", held);
      assert.match(log, /bind refused: Operation not permitted/, "the agent runs under the guard");
      assert.match(log, /listen refused: Operation not permitted/, "and under the listen ban");
      const probe = await s.inNs(["/usr/bin/perl", "-MSocket", "-e", PROBE]);
      console.log("a host process, outside the agent:", probe.out.trim());
      assert.match(probe.out, /udp send ok/, "a host process can still send UDP (a DNS lookup)");
      assert.match(probe.out, /udp bind0 ok/, "a host process can still bind a UDP port 0");
    } finally {
      await s.inNs(["pkill", "-KILL", "-f", `${s.work}/a/connfill.pl`]).catch(() => {});
      await s.close();
    }
  },
});
