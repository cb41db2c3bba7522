/**
 * A `space add` killed part-way (fault pass 9: kill -9 of the CLI) leaves the space listed with
 * some of its daemons never started, or started and off the watchdog's list. The same add
 * completes it; a restore over it says what happened and what to run.
 */
import assert from "node:assert/strict";
import { spaceAdd, spaceIncomplete } from "../../lib/mesh/space.ts";
import { spaceDaemons } from "../../lib/mesh/space_daemons.ts";
import { readMeshRecord, stopComponent } from "../../lib/mesh/stack.ts";
import { down, up } from "../../lib/mesh/up.ts";
import { readWatchList, updateWatchList } from "../../lib/mesh/watchdog.ts";
import { isCotalError } from "../../lib/errors.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

Deno.test("mesh - a space add killed part-way is completed by the same add, watched again, and said so", async () => {
  const root = await tempDir("cotal-spaceint-");
  try {
    await up({
      root,
      space: "main",
      host: "127.0.0.1",
      port: freePort(),
      detach: true,
      say: () => {},
      untilStopped: Promise.resolve(),
    });
    await spaceAdd(root, "team2");
    const rec = (await readMeshRecord(root))!;
    const ids = (await spaceDaemons(root, "team2", rec)).map((d) => d.id);
    // What a kill between the daemons' starts leaves: the supervisor never started, and none
    // of them on the watchdog's list.
    await updateWatchList(root, { remove: (id) => ids.includes(id) });
    await stopComponent(root, ids[2]);
    assert.equal(await spaceIncomplete(root, "team2"), true);
    // status shows the daemon that never ran, and is not healthy (it had no line for it).
    const st = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "status", "--root", root, "--json"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const report = JSON.parse(new TextDecoder().decode(st.stdout));
    assert.equal(st.code, 1);
    assert.equal(report.healthy, false);
    assert.deepEqual(
      report.components.filter((c: { id: string }) => c.id === ids[2]).map((c: { state: string }) =>
        c.state
      ),
      ["stopped"],
    );
    const done = await spaceAdd(root, "team2");
    assert.deepEqual(done, { created: false, completed: true, served: true });
    assert.equal(await spaceIncomplete(root, "team2"), false);
    const watched = (await readWatchList(root)).map((c) => c.id);
    for (const id of ids) assert.ok(watched.includes(id), `${id} is not watched`);
    // Complete now: another add is the old refusal.
    await assert.rejects(
      spaceAdd(root, "team2"),
      (e) => isCotalError(e, "space_exists") && /already served/.test(e.message),
    );
  } finally {
    await down(root).catch(() => {});
    await removeTempDir(root);
  }
});
