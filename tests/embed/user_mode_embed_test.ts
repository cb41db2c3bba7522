/**
 * An embedder's user mode from `mod.ts` alone, on a get/put/delete store of its own: the
 * specification's provisioning, the IdP pin and the actor ledger placed under
 * `userAuthStateDir(root, space)` with the exported helpers, `runAuthService` in process (no
 * `--idp`: the pin is provisioned), a human admitted through the callout on an exchanged
 * bearer, and a `Manager` with `userAuth` whose agent is admitted on the auth service's bearers.
 */
import assert from "node:assert/strict";
import { connect, credsAuthenticator } from "nats";
import {
  type AuthServiceDaemon,
  authServicePaths,
  composeSpaceAuth,
  createActorLedger,
  createBrokerAuth,
  createSpaceAccountAuth,
  ensureCalloutAuth,
  ensureIdpPin,
  ensureIssuer,
  ensureOwnerSecret,
  loadOwnerSecret,
  Manager,
  provisionSpaceStore,
  readDiscoveryFile,
  runAuthService,
  serverConfig,
  userAuthStateDir,
} from "../../mod.ts";
import { deriveOwnerForIdpSubject } from "../../lib/auth/owner.ts";
import { startTestBroker, tempDir, uniqueSpace } from "../_harness/broker.ts";
import { startTestIdp } from "../_harness/idp.ts";
import { MapStore } from "../_harness/map_store.ts";
import { testBwrap } from "../manager/_agent_fixture.ts";

Deno.test("embed - user mode from mod.ts alone: a provisioned pin and ledger, the auth service in process, a human and a Manager's agent admitted by the callout", async () => {
  await testBwrap();
  const space = uniqueSpace("umembed");
  const root = `${await tempDir("cotal-umembed-")}/.cotal`;
  await Deno.mkdir(root, { recursive: true, mode: 0o700 });
  const brokerAuth = await createBrokerAuth("embedder");
  const account = await createSpaceAccountAuth(brokerAuth, space);
  const auth = composeSpaceAuth(brokerAuth, account);
  const store = new MapStore();
  await provisionSpaceStore(store, brokerAuth, account);
  const callout = await ensureCalloutAuth(store, auth);
  await ensureIssuer(store, space);
  await ensureOwnerSecret(store, space);
  const idp = await startTestIdp({ alg: "EdDSA" });
  const broker = await startTestBroker({
    config: ({ port, storeDir }) =>
      serverConfig(auth, [auth], { storeDir, port, extraAccounts: [callout.account] }),
  });
  let manager: Manager | undefined;
  let service: AuthServiceDaemon | undefined;
  try {
    const { setupSpaceStreams, mintCreds, newIdentity } = await import("../../mod.ts");
    await setupSpaceStreams({
      servers: broker.url,
      space,
      creds: await mintCreds(auth, newIdentity(), "provisioner"),
    });
    // The pin and the ledger, where runAuthService reads them.
    const stateDir = userAuthStateDir(root, space);
    await ensureIdpPin({ stateDir }, space, {
      issuer: idp.issuer,
      audience: idp.audience,
      jwksUrl: idp.jwksUrl,
    });
    const owner = await deriveOwnerForIdpSubject(
      await loadOwnerSecret(store, space),
      idp.issuer,
      idp.sub,
    );
    const row = await createActorLedger({ space, stateDir }).grant({
      owner,
      actor: "alice",
      subscribe: [],
      allowSubscribe: ["general"],
      allowPublish: ["general"],
    });
    assert.ok(row.lifecycleUid);

    // As the specification's snippet has it: awaited, it resolves once the service serves.
    service = await runAuthService(
      {
        values: { root, space, server: broker.url, listen: "127.0.0.1:0" },
        positionals: [],
        raw: [],
      },
      store,
    );
    const discovery = await readDiscoveryFile(authServicePaths(root, space).discoveryFile);
    assert.equal(discovery?.url, service.url);
    const { url, cap } = discovery!;

    // A human: an IdP token exchanged for a bearer, admitted by the callout.
    const res = await fetch(`${url}/exchange`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${cap}` },
      body: JSON.stringify({ idpToken: await idp.sign(), actor: "alice" }),
    });
    const exchanged = await res.json();
    assert.equal(res.status, 200, JSON.stringify(exchanged));
    const name = `n${crypto.randomUUID().replaceAll("-", "")}`;
    const nc = await connect({
      servers: broker.url,
      authenticator: credsAuthenticator(new TextEncoder().encode(callout.sentinelCreds)),
      token: exchanged.token,
      name,
      inboxPrefix: `_INBOX_${name}`,
      reconnect: false,
    });
    await nc.flush();
    await nc.close();

    // A Manager on the same store, in user mode: its agent is admitted on bearers.
    manager = new Manager({
      space,
      servers: broker.url,
      workspaceRoot: root,
      secretStore: store,
      layout: { machineHome: `${root}/home/.cotal` },
      userAuth: { url },
      log: () => {},
    });
    await manager.start();
    const agent = await manager.spawn({
      agent: "program",
      name: "helper",
      command: "/bin/sleep",
      args: ["600"],
    });
    assert.equal(agent.present, true);
    assert.match(agent.id, /^u_[a-z2-7]{26}\.helper$/);
    assert.notEqual(agent.id, `${owner}.helper`, "never under the human's owner");
    await manager.despawn("helper");
  } finally {
    await manager?.stop().catch(() => {});
    await service?.stop();
    await broker.stop();
    await idp.close();
  }
});
