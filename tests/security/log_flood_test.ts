/**
 * Log floods a member can drive. Every malformed row an agent writes to its own presence key
 * (its normal grant) used to put one line in the supervisor's log, which grew without bound
 * (the red team measured about 8 GB an hour). Now each kind of member-driven line is written a
 * few times a minute and counted, and the watchdog caps every daemon's log file.
 */
import assert from "node:assert/strict";
import { connect, credsAuthenticator } from "nats";
import { waitFor } from "../_harness/broker.ts";
import { limitLog } from "../../lib/log_limit.ts";
import { capLogFile } from "../../lib/mesh/log_cap.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { bucketNames } from "../../lib/wire/resources.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { provisionAgent } from "../../lib/wire/provision.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";
import { tempDir } from "../_harness/broker.ts";

Deno.test("security - 2,000 malformed presence rows from one agent put a handful of lines in the supervisor's log", async () => {
  await using mesh = await startManagerMesh("flood");
  const lines: string[] = [];
  await mesh.manager({ log: (l) => lines.push(l) });
  const identity = newIdentity();
  const principal = { owner: "local", actor: "flooder" };
  const p = await provisionAgent({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "provisioner"),
    space: mesh.space,
    auth: mesh.auth,
    identity,
    principal,
    lifecycleUid: newLifecycleUid(),
    allowSubscribe: [],
  });
  const nc = await connect({
    servers: mesh.url,
    authenticator: credsAuthenticator(new TextEncoder().encode(p.creds)),
  });
  try {
    const key = `$KV.${bucketNames(mesh.space).presence}.local.flooder`;
    for (let i = 0; i < 2000; i++) nc.publish(key, new TextEncoder().encode(`x${i}`));
    await nc.flush();
    await waitFor(() => lines.some((l) => /presence row/.test(l)), {
      what: "the first malformed-row line",
    });
    // Give the rest time to arrive: they are counted, not written.
    await new Promise((r) => setTimeout(r, 1500));
    const about = lines.filter((l) => /presence row/.test(l));
    assert.ok(about.length >= 1 && about.length <= 5, `${about.length} lines`);
  } finally {
    await nc.close();
  }
});

Deno.test("log - limitLog writes a burst per kind a window, then one line with the count", () => {
  let t = 0;
  const out: string[] = [];
  const log = limitLog((l) => out.push(l), { burst: 3, windowMs: 1000, now: () => t });
  for (let i = 0; i < 10; i++) log("a", `a${i}`);
  log("b", "b0");
  assert.deepEqual(out, ["a0", "a1", "a2", "b0"]);
  t = 1000;
  log("a", "a10");
  assert.deepEqual(out.slice(4), [
    "7 more line(s) of kind a were not logged (at most 3 per 1 s)",
    "a10",
  ]);
  for (let i = 0; i < 5; i++) log("b", "b");
  log.flush();
  assert.equal(out.at(-1), "2 more line(s) of kind b were not logged (at most 3 per 1 s)");
});

Deno.test("log - limitLog keys made up by a sender stay bounded: past the cap they share one key, and ended windows are forgotten (red team 13)", () => {
  let t = 0;
  const out: string[] = [];
  const log = limitLog((l) => out.push(l), { burst: 2, windowMs: 1000, now: () => t, maxKeys: 4 });
  // 10,000 distinct names in one window: four keys, then everything shares the overflow key.
  for (let i = 0; i < 10_000; i++) log(`name${i}`, `line${i}`);
  assert.deepEqual(out, ["line0", "line1", "line2", "line3", "line4", "line5"]);
  // After the window, new names are welcome again: the ended keys are summed up and forgotten.
  t = 1000;
  log("fresh", "fresh0");
  assert.ok(out.includes("9994 more line(s) of kind (other) were not logged (at most 2 per 1 s)"));
  assert.equal(out.at(-1), "fresh0");
});

Deno.test("log - capLogFile keeps one previous file and empties the live one, never through a link", async () => {
  const dir = await tempDir("cotal-logcap-");
  const log = `${dir}/delivery.x.log`;
  await Deno.writeTextFile(log, "a".repeat(2048));
  assert.equal(await capLogFile(log, 4096), false);
  // The writer keeps appending through its open descriptor after the cap.
  const w = await Deno.open(log, { append: true });
  await w.write(new TextEncoder().encode("b".repeat(4096)));
  assert.equal(await capLogFile(log, 4096), true);
  await w.write(new TextEncoder().encode("after"));
  w.close();
  assert.equal((await Deno.stat(`${log}.1`)).size, 6144);
  assert.equal(await Deno.readTextFile(log), "after");
  // A .1 that is not a regular file is never written through.
  await Deno.remove(`${log}.1`);
  await Deno.symlink("/etc/hostname", `${log}.1`);
  await Deno.writeTextFile(log, "c".repeat(8192));
  assert.equal(await capLogFile(log, 4096), false);
  await Deno.remove(dir, { recursive: true });
});
