import assert from "node:assert/strict";
import { SHUTDOWN_STEP_MS } from "../../lib/delivery/run.ts";
import { startDaemonProcess, startDeliverySpace } from "./_helpers.ts";

Deno.test("delivery - a daemon told to stop after its broker died ends within its steps' deadlines", async () => {
  await using s = await startDeliverySpace({ prefix: "nobroker", sys: true });
  const daemon = startDaemonProcess(s);
  try {
    await daemon.waitForLine(/delivery daemon up/, 30_000);
    // The stack killed at once (a foreground up's parent-death signal): the broker first.
    await s.killBroker();
    await new Promise((r) => setTimeout(r, 500));
    const t0 = Date.now();
    daemon.kill("SIGTERM");
    // Its shutdown has four steps that may wait on the broker, each bounded; a minute is far
    // past them all, and a daemon that waits on its drain for a reconnect never ends.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const ended = await Promise.race([
      daemon.exited.then(() => true),
      new Promise<false>((r) => timer = setTimeout(() => r(false), 12 * SHUTDOWN_STEP_MS)),
    ]);
    clearTimeout(timer);
    assert.ok(ended, `still running ${Date.now() - t0} ms after SIGTERM:\n${daemon.stderr()}`);
  } finally {
    daemon.kill("SIGKILL");
    await daemon.exited;
  }
});
