/**
 * A manager that signs through `cotal-signer` (`signer: "remote"`): it spawns and despawns a
 * sandboxed agent with every credential signed by the signer process, and never reads a signer
 * record (its store throws on any). Without its stored supervisor cred it refuses to start with
 * one sentence; with the signer down, a spawn fails with the signer's name in the reason.
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { managerInstanceId } from "../../lib/manager/manager_types.ts";
import { readAudit, signerAuditPath } from "../../lib/signer/mod.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { spaceKeyHex, supervisorCredsKey } from "../../lib/workspace/keys.ts";
import type { SecretStore } from "../../lib/workspace/types.ts";
import { waitFor } from "../_harness/broker.ts";
import { startExecutable } from "../delivery/_helpers.ts";
import { type ManagerMesh, startManagerMesh } from "../manager/_manager_mesh.ts";

/** The mesh's store, except that any signer record (`auth/…`) throws and is counted. */
function storeWithoutSigner(mesh: ManagerMesh): SecretStore & { signerReads: string[] } {
  const signerReads: string[] = [];
  const guard = (key: string) => {
    if (key.startsWith("auth/")) {
      signerReads.push(key);
      throw new Error(`the signer record ${key} was touched`);
    }
  };
  return {
    signerReads,
    get: (k) => (guard(k), mesh.store.get(k)),
    put: (k, v) => (guard(k), mesh.store.put(k, v)),
    create: (k, v) => (guard(k), mesh.store.create(k, v)),
    delete: (k) => (guard(k), mesh.store.delete(k)),
  };
}

function startSigner(mesh: ManagerMesh) {
  const port = new URL(mesh.url).port;
  return startExecutable("cotal-signer", {
    root: mesh.root,
    broker: [`127.0.0.1:${port}`],
    spaceKey: `space.${spaceKeyHex(mesh.space)}`,
  }, ["--space", mesh.space, "--server", mesh.url, "--root", mesh.root]);
}

/** The supervisor cred `cotal up` leaves a remote-signing supervisor. */
async function bootstrapCred(mesh: ManagerMesh): Promise<void> {
  const actor = `manager_${managerInstanceId(mesh.root, mesh.space)}`;
  await mesh.store.put(
    supervisorCredsKey(mesh.space, { injected: true }),
    await mintCreds(mesh.auth, newIdentity(), "supervisor", {
      principal: { owner: "local", actor },
    }),
  );
}

Deno.test("signer - a remote-signing manager spawns and despawns through cotal-signer and never reads a seed", async () => {
  await using mesh = await startManagerMesh("remotesign");
  const signer = startSigner(mesh);
  try {
    await signer.waitForLine(/cotal-signer up for space/);
    await bootstrapCred(mesh);
    const store = storeWithoutSigner(mesh);
    await mesh.manager({ signer: "remote", secretStore: store });
    const ctl = await mesh.control();
    const row = await ctl.request<AgentRow>("spawn", { name: "w1", command: "/bin/cat" }, {
      timeoutMs: 40_000,
    });
    assert.equal(row.present, true);
    await ctl.request("despawn", { name: "w1" }, { timeoutMs: 30_000 });
    assert.deepEqual(store.signerReads, []);
    // Every credential of that lifecycle came from the signer, for the manager's principal.
    const audit = await readAudit(signerAuditPath(mesh.root, mesh.space));
    const asked = audit.filter((e) => e.decision === "allowed").map((e) => e.profile);
    for (const p of ["supervisor", "provisioner", "agent", "deprovisioner"]) {
      assert.ok(asked.includes(p), `${p} not signed by the signer: ${asked.join(", ")}`);
    }
    assert.ok(audit.every((e) => e.caller.startsWith("local.manager_")));
  } finally {
    signer.kill();
    await signer.exited;
  }
});

Deno.test("signer - a remote-signing manager without its cred refuses to start; without its signer it waits, and heals when the signer is back", async () => {
  await using mesh = await startManagerMesh("remotenone");
  await assert.rejects(
    mesh.manager({ signer: "remote", secretStore: storeWithoutSigner(mesh) }),
    (e) => isCotalError(e, "supervisor_creds_missing") && /cotal up writes/.test(e.message),
  );
  await bootstrapCred(mesh);
  // No signer yet: the manager waits for it (its space setup needs a signed provisioner).
  const lines: string[] = [];
  const starting = mesh.manager({
    signer: "remote",
    secretStore: storeWithoutSigner(mesh),
    log: (l) => lines.push(l),
  });
  await waitFor(
    () => lines.some((l) => /space setup failed \(The signer of space .* did not answer/.test(l)),
    {
      timeoutMs: 30_000,
      what: "the manager saying the signer does not answer",
    },
  );
  let signer = startSigner(mesh);
  try {
    await starting;
    const ctl = await mesh.control();
    const spawn = (name: string) =>
      ctl.request<AgentRow>("spawn", { name, command: "/bin/cat" }, { timeoutMs: 40_000 });
    assert.equal((await spawn("w1")).present, true);
    // The signer down: a spawn fails with one sentence naming it, and leaves nothing behind;
    // the running agent goes on.
    signer.kill();
    await signer.exited;
    await assert.rejects(
      spawn("w2"),
      (e) => isCotalError(e) && /The signer of space .* did not answer within/.test(e.message),
    );
    const ps = await ctl.request<{ agents: AgentRow[] }>("ps", {});
    assert.deepEqual(ps.agents.map((a) => [a.name, a.status]), [["w1", "running"]]);
    // Back: spawning works again.
    signer = startSigner(mesh);
    await signer.waitForLine(/cotal-signer up for space/);
    assert.equal((await spawn("w3")).present, true);
  } finally {
    signer.kill();
    await signer.exited;
  }
});

Deno.test("signer - a remote-signing supervisor down longer than its cred's life starts again: the signer re-signs the stored cred at start, same key", async () => {
  await using mesh = await startManagerMesh("remoteexpired");
  await bootstrapCred(mesh);
  const key = supervisorCredsKey(mesh.space, { injected: true });
  const { parseCreds } = await import("../../lib/nats/mod.ts");
  const { credHealth } = await import("../../lib/workspace/mod.ts");
  const { resignedUntil } = await import("../_harness/short_creds.ts");
  // What a stop of more than a day leaves: the cred `cotal up` (or the last re-sign) wrote, expired.
  const before = await parseCreds((await mesh.store.get(key))!);
  const now = Math.floor(Date.now() / 1000);
  await mesh.store.put(key, await resignedUntil(mesh.auth, (await mesh.store.get(key))!, now - 60));
  assert.equal((await credHealth((await mesh.store.get(key))!, now)).status, "expired");
  const signer = startSigner(mesh);
  try {
    await signer.waitForLine(/cotal-signer up for space/);
    await signer.waitForLine(/re-signed supervisor\.creds/);
    const after = await parseCreds((await mesh.store.get(key))!);
    assert.equal((await credHealth((await mesh.store.get(key))!, now)).status, "healthy");
    // The same key (the supervisor's seed never left it), so the supervisor starts from it.
    assert.equal(after.seed, before.seed);
    const store = storeWithoutSigner(mesh);
    const manager = await mesh.manager({ signer: "remote", secretStore: store });
    assert.equal(manager.status().signing, "remote");
    // Its renewals stay in memory: the stored cred is the signer's to write.
    assert.deepEqual(store.signerReads, []);
  } finally {
    signer.kill();
    await signer.exited;
  }
});
