/**
 * Fault pass 12: `cotal spawn --name <n>` and, partway through it, kill -9 of the broker and the
 * supervisor at one instant; the watchdog restarts both. Found (1 of 4 delays by hand, 0.5 s
 * into the spawn): the spawn, resent to the new supervisor, is refused with "m05 has a lifecycle
 * this supervisor does not run (a space restored from another root, or an agent provisioned by
 * hand): 'cotal deprovision m05 --lifecycle <uid>' ends it, or pick another name." The killed
 * supervisor had provisioned the agent's lifecycle on the broker before writing its roster; no
 * supervisor owns it, nothing removes it, and every later `spawn --name m05` is refused the same
 * way until a human runs `cotal deprovision`. The leftover durables stay too.
 *
 * Expected: after the stack heals, the name is either running (the spawn completed) or free (a
 * new spawn of it works), at every kill moment.
 */
import assert from "node:assert/strict";
import { cotalRun, cotalSpawn, kill9, pidsOf, startStack, waitHealthy } from "./_fp12.ts";

Deno.test("fault pass 12 - a spawn cut by kill -9 of broker + supervisor leaves its name running or free, never held by an orphan lifecycle", async () => {
  await using stack = await startStack("sbs");
  const blocked: string[] = [];
  for (const delayMs of [300, 400, 500, 600]) {
    const name = `m${delayMs}`;
    const spawn = cotalSpawn(stack.root, [
      "spawn",
      "--role",
      "up",
      "--name",
      name,
      "--",
      "/usr/bin/tr",
      "a-z",
      "A-Z",
    ]);
    await new Promise((r) => setTimeout(r, delayMs));
    kill9([...pidsOf(stack.root, "nats-server"), ...pidsOf(stack.root, "cmd/supervise.ts")]);
    const timer = setTimeout(() => spawn.kill("SIGKILL"), 180_000);
    const out = await spawn.output();
    clearTimeout(timer);
    const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    await waitHealthy(stack.root, 120_000);
    const ps = await cotalRun(stack.root, ["ps"], 60_000);
    if (new RegExp(`^${name}\\s+task-runner\\s+up\\s+running`, "m").test(ps.text)) continue;
    // Not running: the name must be free again.
    const again = await cotalRun(stack.root, [
      "spawn",
      "--role",
      "up",
      "--name",
      name,
      "--",
      "/usr/bin/tr",
      "a-z",
      "A-Z",
    ]);
    if (again.code !== 0) {
      blocked.push(
        `kill at ${delayMs} ms: spawn said ${JSON.stringify(said.trim().slice(0, 300))}; ` +
          `after healing, spawn --name ${name} said ${JSON.stringify(again.text.trim())}`,
      );
    }
  }
  assert.deepEqual(blocked, [], blocked.join("\n"));
});
