/**
 * The holder lock proves a dead holder and nothing else: while the holder lives nobody else
 * takes it; after a kill -9 the successor gets it and recognises exactly the dead holder's id.
 */
import assert from "node:assert/strict";
import { HolderLock } from "../../lib/workspace/holder_lock.ts";
import { readWithin, tempDir } from "../_harness/broker.ts";

function holder(path: string): { child: Deno.ChildProcess; id: Promise<string> } {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { HolderLock } from ${
        JSON.stringify(new URL("../../lib/workspace/holder_lock.ts", import.meta.url).href)
      };
       const l = await HolderLock.open(${JSON.stringify(path)});
       console.log(l.held ? l.id : "not held");
       await new Promise((r) => setTimeout(r, 60_000));`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const id = readWithin(reader, 30_000, "the holder's id").then((r) => (r.value ?? "").trim());
  return { child, id };
}

Deno.test("holder lock - a live holder keeps it; after kill -9 its successor proves exactly it dead", async () => {
  const dir = await tempDir("cotal-lock-");
  const path = `${dir}/delivery.lock`;
  const h = holder(path);
  const id = await h.id;
  assert.match(id, /^[0-9a-f-]{36}$/);
  try {
    const other = await HolderLock.open(path);
    assert.equal(other.held, false, "a live holder's lock is not taken");
    assert.equal(other.provesDead(id), false);
    assert.equal(await other.tryTake(), false);

    h.child.kill("SIGKILL");
    await h.child.status;
    assert.equal(await other.tryTake(), true, "the kernel dropped the dead holder's flock");
    assert.equal(other.previous, id);
    assert.equal(other.provesDead(id), true);
    // Any other row (a live holder elsewhere, no lock at all) proves nothing.
    assert.equal(other.provesDead(crypto.randomUUID()), false);
    assert.equal(other.provesDead(undefined), false);
    assert.equal(Deno.readTextFileSync(path).trim(), other.id, "the file now names the taker");
    assert.equal(Deno.statSync(path).mode! & 0o777, 0o600);
    other.close();

    // A clean close leaves the id: the next taker sees the closed holder as the last one.
    const next = await HolderLock.open(path);
    assert.equal(next.held, true);
    assert.equal(next.previous, other.id);
    next.close();
  } finally {
    try {
      h.child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
    await h.child.status;
  }
});

Deno.test("holder lock - a lock file that cannot be opened is one sentence with a code", async () => {
  await assert.rejects(
    HolderLock.open("/nonexistent-dir-for-cotal/x.lock"),
    (e: Error & { code?: string }) =>
      e.code === "holder_lock_unavailable" && /Cannot open the lock file/.test(e.message),
  );
});
