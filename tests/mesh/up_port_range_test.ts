/**
 * `up` warns when the broker's port lies in the kernel's ephemeral range: an agent on the
 * host's network binds no IP port, but a socket listening unbound is handed a port from that
 * range, the broker's too while it restarts (red team 33).
 */
import assert from "node:assert/strict";
import { ephemeralPortWarning } from "../../lib/mesh/up_report.ts";

Deno.test("up - a broker port in the ephemeral range is warned about, naming the range and the fix", () => {
  const w = ephemeralPortWarning(40_000, "32768\t60999\n");
  assert.match(
    w!,
    /^warning: the broker's port 40000 is in the kernel's ephemeral range \(32768-60999\)/,
  );
  assert.match(w!, /choose one below 32768 \(cotal down, then cotal up --port <n>\)\.$/);
  for (const edge of [32_768, 60_999]) assert.ok(ephemeralPortWarning(edge, "32768 60999"));
  assert.equal(ephemeralPortWarning(4222, "32768 60999"), undefined);
  assert.equal(ephemeralPortWarning(61_000, "32768 60999"), undefined);
  // The live range, read from /proc: Cotal's default port is below it on a stock kernel.
  const live = Deno.readTextFileSync("/proc/sys/net/ipv4/ip_local_port_range");
  if (Number(live.trim().split(/\s+/)[0]) > 4222) {
    assert.equal(ephemeralPortWarning(4222), undefined);
  }
});
