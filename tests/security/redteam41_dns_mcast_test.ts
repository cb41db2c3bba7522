/**
 * Red team 41: a --net host agent floods a host resolver bound to the wildcard address on port
 * 53 through multicast, past the connect guard's per-packet count of loopback UDP.
 *
 * The guard allows port 53 on every local address (DNS) and counts UDP to it per packet in its
 * `BPF_CGROUP_INET_EGRESS` program (64 per 2 s per agent), but only for packets leaving through
 * the loopback device (`skb->ifindex == 1`). Multicast is "local" to the connect hook, so
 * `224.0.0.1:53` (all hosts) and `ff02::1%<if>:53` (all nodes) are allowed as DNS and not
 * counted there; the datagrams then leave through the outgoing interface, and with
 * `IP_MULTICAST_LOOP` (on by default) the kernel loops a copy back to this host's own sockets
 * (`ip_mc_finish_output` → `dev_loopback_xmit`), where every socket bound to `0.0.0.0:53` or
 * `[::]:53` (dnsmasq, BIND, a container DNS on the wildcard) receives it (`IP_MULTICAST_ALL`).
 * The egress program sees those packets on the outgoing device, not on `lo`: uncounted.
 *
 * Setup: the stack's namespace gets an interface standing for the host's NIC (a veth,
 * `10.41.0.1/24`, `fd41::1/64`, default routes through it; its peer has no address and IPv6 off,
 * so what is sent out goes nowhere and only the kernel's loopback copy reaches anything; this
 * kernel has no dummy driver); a host service counts what reaches
 * `0.0.0.0:53` and `[::]:53`. The agent (`rt41_fixtures/udp_bypass.py`) sends from one connected
 * socket for 3 s per phase.
 *
 * The test passes when no phase delivers more than the guard's count allows in 3 s (two
 * windows of 64, with slack: 256 datagrams). About 30 s.
 */
import assert from "node:assert/strict";
import { rt41Stack, sleep, waitFor } from "./rt41_fixtures/stack.ts";

const ALLOWED = 256;

Deno.test({
  name:
    "red team 41 - a --net host agent cannot flood a wildcard DNS listener through multicast loopback",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt41Stack("mc", ["udp_bypass.py", "counter.py"], [
      ["ip", "link", "add", "rt41a", "type", "veth", "peer", "name", "rt41b"],
      ["ip", "addr", "add", "10.41.0.1/24", "dev", "rt41a"],
      ["ip", "-6", "addr", "add", "fd41::1/64", "dev", "rt41a", "nodad"],
      ["sysctl", "-qw", "net.ipv6.conf.rt41b.disable_ipv6=1"],
      ["ip", "link", "set", "rt41b", "up"],
      ["ip", "link", "set", "rt41a", "up"],
      ["ip", "route", "add", "default", "via", "10.41.0.2", "dev", "rt41a"],
      ["ip", "-6", "route", "add", "default", "via", "fd41::2", "dev", "rt41a"],
    ]);
    let counter: Promise<{ code: number; out: string }> | undefined;
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      counter = s.inNs(
        ["/usr/bin/python3", `${s.work}/a/counter.py`, "53", "26", "0.0.0.0", "::"],
        40_000,
      );
      await sleep(500);
      const m = await s.spawnAgent(
        "mallory",
        "udp_bypass.py",
        ["127.0.0.53", "rt41a", "3", "plain", "mc4", "mc6"],
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
      for (const tag of ["plain", "mc4", "mc6"]) {
        assert.ok(
          got(tag) <= ALLOWED,
          `${tag}: ${got(tag)} datagrams reached the host's port 53 in 3 s (the count allows ~128)`,
        );
      }
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await counter?.catch(() => {});
      await s.close();
    }
  },
});
