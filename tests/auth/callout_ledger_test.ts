/**
 * The callout's read path over the actor ledger (freshReadStore): every read still sees the
 * file as it is now, so a grant or revoke written by another process (the operator's CLI)
 * bites on the very next connect, and a planted symlink is still refused.
 */
import assert from "node:assert/strict";
import { freshReadStore } from "../../lib/auth/fresh_reads.ts";
import { actorLedgerKey } from "../../lib/auth/keys.ts";
import { createActorLedger } from "../../lib/auth/ledger.ts";
import { FsSecretStore } from "../../lib/workspace/fs_secret_store.ts";
import { tempDir } from "../_harness/broker.ts";
import { code, ownerFor } from "./_helpers.ts";

const SPACE = "alpha";

Deno.test("callout ledger - writes by another ledger are seen on the next read", async () => {
  const dir = await tempDir("cotal-ledger-fresh-");
  const daemon = createActorLedger({ space: SPACE, store: freshReadStore(new FsSecretStore(dir)) });
  const operator = createActorLedger({ space: SPACE, stateDir: dir });
  const owner = await ownerFor("alice");
  const grant = {
    owner,
    actor: "alice",
    subscribe: [],
    allowSubscribe: ["general"],
    allowPublish: [],
  };
  assert.equal(await daemon.get(owner, "alice"), undefined);
  const row = await operator.grant(grant);
  assert.equal((await daemon.get(owner, "alice"))?.lifecycleUid, row.lifecycleUid);
  assert.equal((await daemon.get(owner, "alice"))?.lifecycleUid, row.lifecycleUid);
  // A re-grant of the same size (only the uid changes) is still seen at once.
  const again = await operator.grant(grant);
  assert.notEqual(again.lifecycleUid, row.lifecycleUid);
  assert.equal((await daemon.get(owner, "alice"))?.lifecycleUid, again.lifecycleUid);
  await operator.revoke(owner, "alice");
  await assert.rejects(daemon.authorize(owner, "alice"), code("actor_not_granted"));
});

Deno.test("callout ledger - a symlink swapped in after a good read is refused", async () => {
  const dir = await tempDir("cotal-ledger-link-");
  const store = freshReadStore(new FsSecretStore(dir));
  const daemon = createActorLedger({ space: SPACE, store });
  const operator = createActorLedger({ space: SPACE, stateDir: dir });
  const owner = await ownerFor("alice");
  await operator.grant({
    owner,
    actor: "alice",
    subscribe: [],
    allowSubscribe: [],
    allowPublish: [],
  });
  await daemon.authorize(owner, "alice");
  const path = `${dir}/${actorLedgerKey(SPACE)}`;
  const decoy = `${dir}/decoy.json`;
  await Deno.copyFile(path, decoy);
  await Deno.remove(path);
  await Deno.symlink(decoy, path);
  await assert.rejects(daemon.authorize(owner, "alice"), code("ledger_unreadable"));
});
