/**
 * Red team 43: an agent that never reads its terminal, while the operator types into it
 * (`cotal attach`, the control rail's `input`): does the supervisor's write to the pty master
 * block its one thread once the pty's input queue (4 KiB in canonical mode) is full?
 *
 * The supervisor writes through node-pty's `write` (`lib/manager/pty_runtime.ts`) on the same
 * thread that relays every agent's broker traffic. Here a program that never reads (`sleep`) is
 * written 1 MiB in 16 KiB pieces through the real pty runtime, while a 10 ms timer measures the
 * event loop.
 *
 * Observed: the writes returned in ~1 ms, and the loop's longest gap over the next 3 s was
 * ~14 ms: node-pty's master is non-blocking and the bytes wait in its queue. Held (the queue
 * is the operator's own input, so its size is theirs).
 */
import assert from "node:assert/strict";
import { createRuntime } from "../../lib/manager/pty_runtime.ts";

Deno.test({
  name: "red team 43 - typing into an agent that never reads does not block the supervisor",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const rt = await createRuntime("pty");
    const h = await rt.spawn({ command: "/bin/sleep", args: ["30"], env: {}, cwd: "/tmp" });
    let maxGap = 0;
    let last = performance.now();
    const iv = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
    }, 10);
    try {
      const t0 = performance.now();
      for (let i = 0; i < 64; i++) h.write("x".repeat(16_384));
      const took = performance.now() - t0;
      await new Promise((r) => setTimeout(r, 3_000));
      assert.ok(took < 500, `the writes took ${Math.round(took)} ms`);
      assert.ok(maxGap < 500, `the event loop stalled for ${Math.round(maxGap)} ms`);
    } finally {
      clearInterval(iv);
      const exited = new Promise<void>((r) => h.onExit(() => r()));
      h.kill("SIGKILL");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3_000))]);
    }
  },
});
