/**
 * Red team 40: a --net host agent fills the machine's neighbour tables (ARP and IPv6 neighbour
 * discovery) with UDP datagrams to on-link addresses, which nothing counts.
 *
 * The connect guard counts TCP connects only (64 per agent per 2 s); its UDP send hooks only
 * close the host's own addresses. A datagram to a new on-link address (the LAN's IPv6 /64, a
 * docker bridge's 172.17.0.0/16, any IPv4 LAN) makes the kernel create an incomplete neighbour
 * entry (IPv6: one more for the target's solicited-node multicast group), held for seconds while
 * it solicits. The ARP and ND tables are one per machine, shared by every network namespace,
 * and capped by `gc_thresh3` (1024 by default): past it the kernel logs "neighbor table
 * overflow!" and creates no entry, so no process on the machine, in any container either, can
 * resolve a new neighbour (a host on its LAN, its gateway once that entry is due again) for as
 * long as the agent keeps sending. The entries are kernel memory no cgroup is charged for.
 *
 * First run (stack in its own network namespace, a veth carrying `fd40:40::1/64` and
 * `10.40.0.1/16` whose peer answers nothing): the agent's 150 datagrams to `fd40:40::2..` and
 * 150 to `10.40.0.2..` were all accepted (1.4 ms and 2.1 ms per batch), and the machine-wide
 * entry counts, read from the test's own (the machine's) namespace, rose from 4 to 306 (ND) and
 * from 3 to 153 (ARP): at that rate the default cap of 1024 is reached in ~10 ms. The attack is kept under
 * `gc_thresh2` (512) here so this shared machine's tables are never forced to collect; deleting
 * the namespace removes every entry.
 *
 * The test passes when a burst of such datagrams adds fewer than 64 entries to either table
 * (what a guard counting new UDP destinations like TCP connects would allow). About 20 s.
 */
import assert from "node:assert/strict";
import { rt40Stack, sleep, waitFor } from "./rt40_fixtures/stack.ts";

/** The machine-wide entry count of a neighbour table (`arp_cache` or `ndisc_cache`). */
function entries(table: string): number {
  const text = Deno.readTextFileSync(`/proc/net/stat/${table}`);
  return parseInt(text.split("\n")[1].trim().split(/\s+/)[0], 16);
}

const N = 150;

Deno.test({
  name:
    "red team 40 - a --net host agent cannot fill the machine's neighbour tables with UDP to on-link addresses",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const gc2 = Number(Deno.readTextFileSync("/proc/sys/net/ipv6/neigh/default/gc_thresh2"));
    const before = { nd: entries("ndisc_cache"), arp: entries("arp_cache") };
    // Keep this shared machine's tables under the threshold where the kernel collects.
    if (before.nd + 2 * N > gc2 - 100 || before.arp + N > gc2 - 100) {
      console.log(`skipped: the machine's tables already hold ${JSON.stringify(before)}`);
      return;
    }
    const s = await rt40Stack("nf", ["neigh.py"], [
      ["ip", "link", "add", "rt40a", "type", "veth", "peer", "name", "rt40b"],
      ["ip", "-6", "addr", "add", "fd40:40::1/64", "dev", "rt40a", "nodad"],
      ["ip", "addr", "add", "10.40.0.1/16", "dev", "rt40a"],
      ["ip", "link", "set", "rt40a", "up"],
      ["ip", "link", "set", "rt40b", "up"],
    ]);
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      const base = { nd: entries("ndisc_cache"), arp: entries("arp_cache") };
      const m = await s.spawnAgent(
        "mallory",
        "neigh.py",
        [String(N), "fd40:40::", "10.40."],
        true,
      );
      assert.equal(m.code, 0, m.out);
      const agentLog = await waitFor(`${s.work}/a/neigh.log`, /done/, 30_000);
      await sleep(300);
      const after = { nd: entries("ndisc_cache"), arp: entries("arp_cache") };
      const nsNeigh = await s.inNs(["ip", "neigh", "show", "dev", "rt40a"]);
      console.log("agent:\n" + agentLog.trim());
      console.log(
        `machine-wide entries: before the stack ${JSON.stringify(before)}, before the agent ${
          JSON.stringify(base)
        }, after ${JSON.stringify(after)}; the namespace lists ${
          nsNeigh.out.trim().split("\n").filter((l) => l).length
        } on rt40a`,
      );
      assert.match(agentLog, /v6 sent/, "the agent ran");
      assert.ok(after.nd - base.nd < 64, `ND entries added: ${after.nd - base.nd}`);
      assert.ok(after.arp - base.arp < 64, `ARP entries added: ${after.arp - base.arp}`);
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await s.close();
      console.log(`after teardown: nd ${entries("ndisc_cache")} arp ${entries("arp_cache")}`);
    }
  },
});
