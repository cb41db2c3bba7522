/**
 * Red team 48: the supervisor fills the ledger past its share.
 *
 * `POST /agents` `grant` keeps a space's supervised agents to `MAX_SUPERVISED_ROWS` (1,024)
 * rows "so a supervisor cannot fill the ledger the IdP users share" (promise 3). The check
 * counts the rows with `ledger.list()` and only then queues the write (`ledger.grant`, which is
 * serialised); the count is not taken inside the serialised write. A supervisor (anyone holding
 * its cred) that sends its whole rate burst (256) of grants for new names at once, while it
 * holds just under the bound, has each of them counted against the same ledger: every one
 * passes and is written.
 *
 * Passes when the defence holds: the supervised owner never holds more than 1,024 rows.
 */
import assert from "node:assert/strict";
import { AGENT_BEARER_RATE, MAX_SUPERVISED_ROWS } from "../../lib/auth/agent_bearers.ts";
import { actorLedgerKey } from "../../lib/auth/keys.ts";
import { authServicePaths } from "../../lib/auth/service_files.ts";
import { FsSecretStore } from "../../lib/workspace/mod.ts";
import { ask, OPEN_GRANT, startRt48, uid } from "./_rt48.ts";

Deno.test("redteam48 rows race - a burst of concurrent grants cannot take the supervisor past MAX_SUPERVISED_ROWS", async () => {
  const t = await startRt48();
  try {
    const { mesh, owner } = t;
    // The supervisor already holds all but 4 of its rows (written as the ledger writes them).
    const start = MAX_SUPERVISED_ROWS - 4;
    const now = Math.floor(Date.now() / 1000);
    const actors = Array.from({ length: start }, (_, i) => ({
      owner,
      actor: `pre${i}`,
      subscribe: [],
      allowSubscribe: [],
      allowPublish: [],
      scope: [],
      label: "cotal-supervise",
      lifecycleUid: uid(),
      grantedAt: now,
    }));
    const store = new FsSecretStore(authServicePaths(mesh.root, mesh.space).stateDir);
    await store.put(
      actorLedgerKey(mesh.space),
      JSON.stringify({ ver: 1, space: mesh.space, actors }),
    );
    assert.equal((await mesh.ledger.list()).length, start);

    // One burst: every grant is for a new name.
    const burst = AGENT_BEARER_RATE.burst - 6;
    const results = await Promise.all(
      Array.from({ length: burst }, (_, i) =>
        ask(
          t.svc.discovery.url,
          {
            op: "grant",
            actor: `race${i}`,
            lifecycleUid: uid(),
            grant: OPEN_GRANT,
          },
          t.supervisor,
          { timeoutMs: 60_000 },
        )),
    );
    const ok = results.filter((r) => r.status === 200).length;
    const full = results.filter((r) => r.body.code === "ledger_full").length;
    const rows = (await mesh.ledger.list()).filter((r) => r.owner === owner).length;
    console.log(`burst ${burst}: ${ok} granted, ${full} ledger_full; supervised rows now ${rows}`);
    assert.ok(
      rows <= MAX_SUPERVISED_ROWS,
      `the supervisor holds ${rows} rows, over its ${MAX_SUPERVISED_ROWS} (${ok} of ${burst} ` +
        "concurrent grants passed the count)",
    );
  } finally {
    await t.close();
  }
});
