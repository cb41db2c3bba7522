import assert from "node:assert/strict";
import { down, up } from "../../lib/mesh/up.ts";
import { spaceAdd, spaceRm } from "../../lib/mesh/space.ts";
import { connectionEvictorCredsKey, membershipObserverCredsKey } from "../../lib/workspace/mod.ts";
import { workspaceSecretStore } from "../../lib/workspace/mod.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

Deno.test("mesh - a space added while the stack is down is served by the next up, its $SYS creds included (newcomer pass 9)", async () => {
  const root = await tempDir("cotal-stopped-add-");
  const port = freePort();
  const upOnce = (said: string[]) =>
    up({
      root,
      space: "first",
      host: "127.0.0.1",
      port,
      detach: true,
      say: (l) => said.push(l),
      untilStopped: Promise.resolve(),
    });
  try {
    await upOnce([]);
    await down(root);
    // Added while nothing runs: listed, not served, and said so.
    const added = await spaceAdd(root, "second");
    assert.deepEqual(added, { created: true, served: false });
    const store = workspaceSecretStore(root);
    const sysKeys = [
      membershipObserverCredsKey("second", { root }),
      connectionEvictorCredsKey("second", { root }),
    ];
    for (const k of sysKeys) assert.equal(await store.get(k), undefined);
    // The next up serves it and re-issues the system account, so its $SYS creds exist.
    const said: string[] = [];
    const result = await upOnce(said);
    assert.ok(
      said.some((l) => /minted the \$SYS \(broker monitoring\) creds that second lacked/.test(l)),
      said.join("\n"),
    );
    for (const k of sysKeys) assert.ok(await store.get(k), `${k} is missing after up`);
    assert.ok(result.url);
    // Removed while nothing runs: its streams' files go from disk, and the result says so
    // rather than "0 streams deleted" (newcomer pass 10).
    await down(root);
    const rm = await spaceRm(root, "second");
    assert.deepEqual(rm.deletedStreams, []);
    assert.equal(rm.removedOnDisk, true);
  } finally {
    await down(root).catch(() => {});
    await removeTempDir(root);
  }
});
