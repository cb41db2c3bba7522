/**
 * Red team 40: a --net host agent floods the host's DNS resolver on the loopback, the one host
 * loopback service the connect guard leaves open to it, until honest lookups on the host fail.
 *
 * The guard allows port 53 on every loopback address (for a stub resolver such as
 * systemd-resolved on `127.0.0.53`) and counts TCP connects only: a UDP `connect` there, or an
 * addressed send, is neither refused nor counted, and the agent may hold up to 1,024 UDP sockets.
 * A resolver is one process with one socket buffer: datagrams beyond what it answers are
 * dropped, the honest ones with them.
 *
 * First run (stack in its own network namespace; a one-thread resolver stand-in answering every
 * datagram on `127.0.0.53:53`; an honest client on the host asking every 50 ms with a 500 ms
 * timeout): before the agent, 60 of 60 queries were answered in every run. The agent compiled
 * `udpflood.c` in its sandbox with the host's `/usr/bin/gcc` and ran it in 4 processes
 * (`connect` to `127.0.0.53:53`, then `sendmmsg` 64 at a time): 3.5-4.9 million datagrams in
 * 12 s, none refused. During the flood the honest client got 3 of 14, 9 of 19, 20 of 29 and
 * (a 3 s window) 2 of 8 answers: 31-79 % of honest lookups lost, varying with how this shared
 * 2-core machine scheduled the two sides (8 processes did no better: 14 of 24, 17 of 27; Python
 * sends, 2.2 million datagrams in 10 s: 5 of 10). A lookup through glibc (5 s timeout, 2 tries)
 * then often takes 5-10 s or fails.

 * The test passes when the agent can send fewer than 96,000 datagrams (8,000 a second) to
 * the resolver in 12 s; it prints the honest client's answers.
 * About 30 s.
 */
import assert from "node:assert/strict";
import { rt40Stack, sleep, waitFor } from "./rt40_fixtures/stack.ts";

const RESOLVER = "127.0.0.53";
/** 8,000 a second for 12 s: far above any agent's own lookups, far below a flood. */
const LIMIT = 96_000;

Deno.test({
  name:
    "red team 40 - a --net host agent cannot flood the host's DNS resolver until host lookups fail (run only with COTAL_SLOW_TESTS=1: tests/manager/connect_guard_test.ts checks the per-packet count on the loopback's DNS port in the suite)",
  ignore: !Deno.env.get("COTAL_SLOW_TESTS"),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt40Stack("dn", ["dns_flood.py", "udpflood.c", "resolver.py", "dns_client.py"]);
    let resolver: Deno.ChildProcess | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      resolver = s.spawnInNs(["/usr/bin/python3", `${s.work}/a/resolver.py`, RESOLVER, "53"]);
      await sleep(500);
      const client = `${s.work}/a/dns_client.py`;
      const base = await s.inNs(["/usr/bin/python3", client, RESOLVER, "53", "3"], 20_000);
      console.log(`honest client before the agent: ${base.out.trim()}`);
      const m = await s.spawnAgent(
        "mallory",
        "dns_flood.py",
        [RESOLVER, "53", "4", "12"],
        true,
      );
      assert.equal(m.code, 0, m.out);
      await sleep(3_000);
      const during = await s.inNs(["/usr/bin/python3", client, RESOLVER, "53", "6"], 20_000);
      console.log(`honest client during the flood: ${during.out.trim()}`);
      const agentLog = await waitFor(`${s.work}/a/flood.log`, /done/, 30_000);
      console.log("agent:\n" + agentLog.trim());
      const parse = (t: string) => t.match(/answered (\d+) of (\d+)/)!.slice(1).map(Number);
      const [b, bn] = parse(base.out);
      const [a, an] = parse(during.out);
      const sent = [...agentLog.matchAll(/ sent (\d+) /g)].reduce((t, x) => t + Number(x[1]), 0);
      console.log(`honest answers: ${b}/${bn} before, ${a}/${an} during; agent sent ${sent}`);
      assert.ok(b >= bn * 0.9, `the resolver answers without the agent: ${b} of ${bn}`);
      // The honest loss depends on how the machine schedules the two sides (31-79 % lost over five
      // runs); what a defence would bound is the agent's own rate.
      assert.ok(
        sent < LIMIT,
        `the agent sent ${sent} datagrams to the resolver in 12 s, none refused`,
      );
    } finally {
      try {
        resolver?.kill("SIGKILL");
        await resolver?.status;
      } catch {
        // Gone.
      }
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await s.close();
    }
  },
});
