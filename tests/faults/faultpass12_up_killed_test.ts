/**
 * Fault pass 12: kill -9 of `cotal up --detach` itself, on a fresh root, part-way. Found: killed
 * the moment its supervisor existed (the daemons were started before the watchdog pair), the
 * broker, delivery, signer and supervisor kept running with no watchdog, and a daemon that died
 * afterwards was never restarted: the stack no longer healed by itself until a human ran `up`.
 *
 * Killed at any point, `up` should leave either nothing running, or a stack that heals. Now
 * `up --detach` leaves a note of itself, starts its watchdog pair first and lists each
 * component the moment it runs; the first watchdog runs an up whose note outlived it again
 * (lib/mesh/up_resume.ts), which starts what the killed one had not.
 */
import assert from "node:assert/strict";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import { cotalRun, cotalSpawn, kill9, pidsOf, rangePort } from "./_fp12.ts";

async function killUpOnce(marker: string) {
  const base = await tempDir("cotal-fp12-upk-");
  const root = `${base}/.cotal`;
  const port = rangePort();
  try {
    const up = cotalSpawn(root, ["up", "--detach", "--port", String(port)]);
    await waitFor(() => pidsOf(root, marker).length > 0, {
      timeoutMs: 120_000,
      intervalMs: 20,
      what: `up started ${marker}`,
    });
    up.kill("SIGKILL");
    await up.output().catch(() => {});
    await new Promise((r) => setTimeout(r, 2_000));
    const running = processesMentioning(root);
    if (running.length === 0) return; // nothing left behind: held
    // Something runs: it must be a stack that heals, and stays healed. A daemon dies too.
    kill9(pidsOf(root, "cmd/delivery.ts"));
    let status = "";
    const healed = await waitFor(async () => {
      const s = await cotalRun(root, ["status"], 30_000);
      status = s.text;
      return s.code === 0;
    }, { timeoutMs: 120_000, intervalMs: 3_000 }).then(() => true, () => false);
    const watchdogLog = await Deno.readTextFile(`${root}/logs/watchdog.log`).catch(() => "");
    const resumed = await Deno.readTextFile(`${root}/logs/up-resumed.log`).catch(() => "");
    assert.ok(
      healed,
      `up was killed once ${marker} ran, with ${running.length} processes of it running; ` +
        `120 s on, the stack was not whole. status:\n${status}\nwatchdog:\n${watchdogLog}\n` +
        `the resumed up:\n${resumed.slice(-3000)}`,
    );
  } finally {
    await cotalRun(root, ["down"], 120_000).catch(() => {});
    kill9(processesMentioning(root));
  }
}

Deno.test({
  name:
    "fault pass 12 - kill -9 of up --detach the moment its broker exists (no daemon yet) leaves nothing running, or a stack that heals",
  fn: () => killUpOnce("nats-server"),
});

Deno.test({
  name:
    "fault pass 12 - kill -9 of up --detach the moment its supervisor exists leaves nothing running, or a stack that heals",
  fn: () => killUpOnce("cmd/supervise.ts"),
});
