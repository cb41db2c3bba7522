import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { AgentIdPool, parseIdRange } from "../../lib/manager/sandbox/ids.ts";
import { readWithin, tempDir } from "../_harness/broker.ts";

Deno.test("agent ids - each agent its own uid, the range's first id their group, never shared", async () => {
  const lockDir = `${await tempDir("cotal-ids-")}/locks`;
  const range = { first: 2_000_000_000, count: 4 };
  const a = new AgentIdPool(range, lockDir);
  const b = new AgentIdPool(range, lockDir);
  const held = [await a.acquire(), await b.acquire(), await a.acquire()];
  assert.equal(new Set(held.map((i) => i.uid)).size, 3);
  for (const i of held) {
    assert.equal(i.gid, 2_000_000_000);
    assert.ok(i.uid > 2_000_000_000 && i.uid < 2_000_000_004);
  }
  // Three uids, all held (across two pools): the fourth is refused with a sentence.
  await assert.rejects(
    b.acquire(),
    (e) => isCotalError(e, "agent_ids_exhausted") && /--agent-ids/.test(e.message),
  );
  held[1].release();
  const again = await a.acquire();
  assert.equal(again.uid, held[1].uid);
  a.releaseAll();
  b.releaseAll();
});

Deno.test("agent ids - a uid held by another process is never handed out; its death frees it", async () => {
  const lockDir = `${await tempDir("cotal-ids-")}/locks`;
  const range = { first: 2_000_000_100, count: 2 };
  // Another supervisor process holds the only uid.
  const holder = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { AgentIdPool } from ${
        JSON.stringify(new URL("../../lib/manager/sandbox/ids.ts", import.meta.url).href)
      };
       const ids = await new AgentIdPool(${JSON.stringify(range)}, ${
        JSON.stringify(lockDir)
      }).acquire();
       console.log(ids.uid); await new Promise((r) => setTimeout(r, 60000));`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = holder.stdout.getReader();
  const first = new TextDecoder().decode(
    (await readWithin(reader, 30_000, "the holder's uid")).value,
  );
  assert.equal(Number(first.trim()), 2_000_000_101);
  const pool = new AgentIdPool(range, lockDir);
  await assert.rejects(pool.acquire(), (e) => isCotalError(e, "agent_ids_exhausted"));
  holder.kill("SIGKILL");
  await holder.status;
  reader.releaseLock();
  await holder.stdout.cancel();
  assert.equal((await pool.acquire()).uid, 2_000_000_101);
  pool.releaseAll();
});

Deno.test("agent ids - a range must be first-last, above the login and system ids", () => {
  assert.deepEqual(parseIdRange("600000-600099"), { first: 600000, count: 100 });
  for (const bad of ["1000-2000", "600000", "600000-600001", "x-y", "600000-4294967295"]) {
    assert.throws(() => parseIdRange(bad), (e) => isCotalError(e, "agent_ids_invalid"), bad);
  }
});
