/**
 * The machine's registry of meshes: an entry per space and root, so two roots that each run a
 * space of one name keep their entries apart (stopping one leaves the other findable); a name
 * several live roots serve is refused with the roots named; entries a crashed root left behind
 * give way to the one whose broker answers.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  listMeshes,
  lookupMesh,
  registerMesh,
  unregisterMesh,
} from "../../lib/workspace/machine_registry.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

Deno.test("mesh registry - two roots of one space name: kept apart, ambiguous while both answer, the live one after", async () => {
  const home = await tempDir("cotal-registry-");
  const a = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const b = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const url = (l: Deno.Listener) => `nats://127.0.0.1:${(l.addr as Deno.NetAddr).port}`;
  try {
    await registerMesh({ space: "default", root: "/r1/.cotal", url: url(a) }, home);
    await registerMesh({ space: "default", root: "/r2/.cotal", url: url(b) }, home);
    assert.equal((await listMeshes(home)).length, 2);
    await assert.rejects(
      lookupMesh("default", home),
      (e) =>
        isCotalError(e, "mesh_ambiguous") &&
        /runs under 2 roots \(\/r1\/\.cotal, \/r2\/\.cotal\); pass --root/.test(e.message),
    );
    // The second root's broker goes away without a down: the first is found.
    b.close();
    assert.equal((await lookupMesh("default", home))?.root, "/r1/.cotal");
    // Stopping the second root takes its own entry only.
    await unregisterMesh("default", "/r2/.cotal", home);
    assert.deepEqual((await listMeshes(home)).map((e) => e.root), ["/r1/.cotal"]);
    assert.equal((await lookupMesh("default", home))?.url, url(a));
    // An entry written by the first registry (one file per space) is read, and replaced.
    const legacy = `${home}/meshes/space.${"0".repeat(32)}.json`;
    await Deno.writeTextFile(
      legacy,
      JSON.stringify({ space: "old", root: "/r3", url: `nats://127.0.0.1:${freePort()}` }),
    );
    assert.equal((await lookupMesh("old", home))?.root, "/r3");
  } finally {
    try {
      a.close();
    } catch {
      // Closed.
    }
    await removeTempDir(home);
  }
});
