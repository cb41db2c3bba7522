/**
 * Red team 42: a --net host agent floods the host's resolver on the loopback over TCP, past the
 * connect guard's per-packet count of loopback UDP.
 *
 * Red team 40 flooded a host resolver with 4 million datagrams through one connected UDP
 * socket; the guard's `BPF_CGROUP_INET_EGRESS` program now counts UDP leaving through the
 * loopback device per packet (64 per 2 s per agent), and red team 41 closed UDP segmentation
 * and multicast around that count. But the same program lets every TCP packet to an allowed
 * loopback port (DNS, 53) through uncounted, and the connect hook counts TCP *connections*
 * (64 per 2 s): the number of queries one connection carries is not bounded. DNS over TCP
 * (RFC 7766) pipelines any number of length-prefixed queries on one connection, and every
 * resolver on a host's loopback (systemd-resolved's stub on 127.0.0.53, dnsmasq, BIND, unbound)
 * serves TCP on 53 beside UDP.
 *
 * Setup: a host service on `127.0.0.53:53/tcp` (systemd-resolved's stub address) that reads and
 * counts every DNS message; the agent (`rt42_fixtures/tcp_dns_flood.py`) sends for 3 s per
 * phase: `udp` (one connected UDP socket, the counted baseline), `tcp` (one TCP connection,
 * pipelined queries), `hold` (as many TCP connections to the resolver as it can keep open in
 * 3 s: systemd-resolved's stub serves at most 128 TCP streams, `DNS_STREAMS_MAX`).
 *
 * Observed (before any fix): udp: 128 queries got out in 3 s, 4,960 sends refused (the count
 * holds); tcp: the resolver read 300,032-1,469,952 queries (11-56 MB; the reader was the
 * limit) in 3 s over one connection, ~2,300-11,000 times the UDP allowance; hold: 128 connections held open at once (64 per 2 s window, more the
 * longer it runs, up to the agent's 1,024 sockets), every stream slot systemd-resolved has.
 *
 * The test passes when the resolver hears no more queries in 3 s over TCP than the UDP count
 * allows (two windows of 64 with slack: 256), and the agent cannot hold 128 of its TCP streams.
 * About 35 s.
 */
import assert from "node:assert/strict";
import { rt42Stack, sleep, waitFor } from "./rt42_fixtures/stack.ts";

const ALLOWED = 256;
/** systemd-resolved's limit of TCP streams (src/resolve/resolved-dns-stream.h). */
const RESOLVED_STREAMS = 128;

Deno.test({
  name:
    "red team 42 - a --net host agent cannot flood the host's loopback resolver over DNS-over-TCP (run only with COTAL_SLOW_TESTS=1: tests/manager/connect_guard_test.ts checks that TCP to the loopback's DNS port is refused in the suite)",
  ignore: !Deno.env.get("COTAL_SLOW_TESTS"),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt42Stack("td", ["tcp_dns_flood.py", "tcp_dns_host.py"]);
    let host: Promise<{ code: number; out: string }> | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      host = s.inNs(
        ["/usr/bin/python3", `${s.work}/a/tcp_dns_host.py`, "53", "26", "127.0.0.53"],
        40_000,
      );
      await sleep(500);
      const m = await s.spawnAgent(
        "mallory",
        "tcp_dns_flood.py",
        ["127.0.0.53", "3", "udp", "tcp", "hold"],
        true,
      );
      assert.equal(m.code, 0, m.out);
      const log = await waitFor(`${s.work}/a/flood.log`, /done/, 35_000);
      console.log("agent:\n" + log.trim());
      const heard = (await host).out;
      host = undefined;
      console.log("host resolver:\n" + heard.trim());
      assert.match(log, /done/, "the agent ran its phases");
      const got = (tag: string) =>
        Number(heard.match(new RegExp(`^${tag} (\\d+)$`, "m"))?.[1] ?? 0);
      // The baseline: over UDP the guard lets ~128 of the agent's queries out in 3 s.
      const udpSent = Number(log.match(/^udp: (\d+) queries sent/m)?.[1] ?? -1);
      assert.ok(udpSent > 0 && udpSent <= ALLOWED, `udp baseline: ${udpSent} sent in 3 s`);
      const held = got("conns_max");
      const problems: string[] = [];
      if (got("tcp") > ALLOWED) {
        problems.push(
          `tcp: ${got("tcp")} queries (${got("bytes")} bytes) reached the resolver in 3 s over ` +
            `one connection (UDP is held to ~128)`,
        );
      }
      if (held >= RESOLVED_STREAMS) {
        problems.push(`hold: ${held} TCP connections to the resolver open at once`);
      }
      assert.deepEqual(problems, [], problems.join("; "));
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await host?.catch(() => {});
      await s.close();
    }
  },
});
