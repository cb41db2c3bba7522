/**
 * Red team 41: a --net host agent sends the host's stub resolver many times more datagrams than
 * the connect guard's per-packet count of loopback UDP allows, through UDP segmentation offload.
 *
 * The guard's `BPF_CGROUP_INET_EGRESS` program counts each UDP packet leaving through the
 * loopback device to an allowed port (DNS): 64 per 2 s per agent. With `UDP_SEGMENT` (a
 * `setsockopt(SOL_UDP, 103)` any process may make) one `send` hands the kernel a single GSO
 * packet of up to 64 segments; the loopback device carries it whole (it offloads segmentation),
 * so the egress program runs, and counts, once, and the receiving socket (no `UDP_GRO`) splits it
 * into that many datagrams.
 *
 * Setup: a host service counting datagrams on `127.0.0.53:53` (systemd-resolved's address); the
 * agent (`rt41_fixtures/udp_bypass.py`) sends from one connected socket for 3 s, plain and then
 * with 32-byte segments, 64 to a send.
 *
 * The test passes when neither phase delivers more than the count allows in 3 s (two windows of
 * 64, with slack: 256 datagrams). About 30 s.
 */
import assert from "node:assert/strict";
import { rt41Stack, sleep, waitFor } from "./rt41_fixtures/stack.ts";

const ALLOWED = 256;

Deno.test({
  name:
    "red team 41 - a --net host agent cannot multiply its counted DNS packets with UDP segmentation offload",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt41Stack("gs", ["udp_bypass.py", "counter.py"]);
    let counter: Promise<{ code: number; out: string }> | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      counter = s.inNs(
        ["/usr/bin/python3", `${s.work}/a/counter.py`, "53", "18", "127.0.0.53"],
        40_000,
      );
      await sleep(500);
      const m = await s.spawnAgent(
        "mallory",
        "udp_bypass.py",
        ["127.0.0.53", "lo", "3", "plain", "gso"],
        true,
      );
      assert.equal(m.code, 0, m.out);
      const log = await waitFor(`${s.work}/a/bypass.log`, /done/, 30_000);
      console.log("agent:\n" + log.trim());
      const heard = (await counter).out;
      counter = undefined;
      console.log("host service:\n" + heard.trim());
      assert.match(log, /done/, "the agent ran its phases");
      const got = (tag: string) =>
        Number(heard.match(new RegExp(`^${tag} (\\d+)$`, "m"))?.[1] ?? 0);
      assert.ok(got("plain") > 0, "plain DNS reaches the host's resolver (the allowed path)");
      for (const tag of ["plain", "gso"]) {
        assert.ok(
          got(tag) <= ALLOWED,
          `${tag}: ${got(tag)} datagrams reached the resolver in 3 s (the count allows ~128)`,
        );
      }
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await counter?.catch(() => {});
      await s.close();
    }
  },
});
