import assert from "node:assert/strict";
import { connect } from "nats";
import { down, up } from "../../lib/mesh/up.ts";
import { loadBrokerAuth } from "../../lib/mesh/trust_state.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";
import { membershipObserverCredsKey, workspaceSecretStore } from "../../lib/workspace/mod.ts";
import { isCotalError } from "../../lib/errors.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";
import { expectRefused } from "../_harness/refused.ts";

async function connects(url: string, creds: string): Promise<boolean> {
  const attempt = () =>
    connect({ servers: url, authenticator: credsAuthenticatorFast(creds), reconnect: false });
  try {
    await expectRefused(attempt);
    return false;
  } catch {
    // It connected (expectRefused closed it).
    return true;
  }
}

Deno.test("mesh - up --rotate-sys re-issues the system account: old $SYS creds refused, new ones work", async () => {
  const root = await tempDir("cotal-root-");
  const port = freePort();
  const opts = {
    root,
    space: "main",
    host: "127.0.0.1",
    port,
    detach: true,
    say: () => {},
    untilStopped: Promise.resolve(),
  };
  try {
    const r = await up(opts);
    const store = workspaceSecretStore(root);
    const key = membershipObserverCredsKey("main", { root });
    const first = (await store.get(key))!;
    assert.ok(first, "the first up mints the $SYS creds while it holds the system seed");
    assert.ok(await connects(r.url, first));
    const sys1 = (await loadBrokerAuth(store))!.sys.pub;

    await assert.rejects(up({ ...opts, rotateSys: true }), (e) => isCotalError(e, "mesh_running"));
    await down(root);
    await up({ ...opts, rotateSys: true });
    const rotated = (await loadBrokerAuth(store))!;
    assert.notEqual(rotated.sys.pub, sys1);
    assert.equal(rotated.gen, 1);
    assert.equal(rotated.sys.signingSeed, undefined, "the system seed is never persisted");
    const second = (await store.get(key))!;
    assert.notEqual(second, first);
    assert.ok(await connects(r.url, second));
    assert.equal(await connects(r.url, first), false);
  } finally {
    await down(root);
    await removeTempDir(root);
  }
});
