/**
 * The auth-service daemon as a real process under its permission row: boot order, the
 * discovery file, the read-only faces, refusals of missing material, and a clean SIGTERM.
 */
import assert from "node:assert/strict";
import type { NatsConnection } from "nats";
import { authServicePaths, readDiscoveryFile } from "../../lib/auth/service_files.ts";
import { loadIdpPin } from "../../lib/auth/idp_pin.ts";
import { spaceKeyHex } from "../../lib/workspace/keys.ts";
import { denoRunFlags } from "../../lib/permissions.ts";
import { tempDir, waitFor } from "../_harness/broker.ts";
import { spawnService, startServiceMesh } from "./_service_mesh.ts";

Deno.test("service - boots under its permission row, publishes auth-service.json last, exits 0 on SIGTERM", async () => {
  const mesh = await startServiceMesh();
  try {
    // The row: no signer read, no run, no FFI; the IdP and the broker are the only remote hosts.
    assert.ok(mesh.flags.some((f) => f === `--deny-read=${mesh.root}/secrets/auth`));
    assert.ok(!mesh.flags.some((f) => f.startsWith("--allow-run") || f === "--allow-ffi"));
    const svc = await mesh.start();
    const { discoveryFile, stateDir } = authServicePaths(mesh.root, mesh.space);
    assert.equal((await Deno.stat(discoveryFile)).mode! & 0o777, 0o600);
    assert.match(svc.discovery.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(svc.discovery.pid, svc.child.pid);
    assert.match(svc.discovery.cap, /^[0-9a-f]{64}$/);
    // Boot order: the callout was connected and flushed before readiness was claimed.
    const ready = svc.events.findIndex((e) => e.event === "ready");
    assert.ok(ready >= 0);
    // The IdP was pinned on first start through OIDC discovery.
    const pin = await loadIdpPin({ stateDir }, mesh.space);
    assert.equal(pin.issuer, mesh.idp.issuer);
    assert.equal(pin.jwksUrl, mesh.idp.jwksUrl);

    const health = await fetch(`${svc.discovery.url}/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), {
      ok: true,
      space: mesh.space,
      issuer: `urn:cotal:auth:${mesh.space}`,
      callout: "connected",
    });
    const jwks = await fetch(`${svc.discovery.url}/jwks`);
    assert.equal(jwks.headers.get("cache-control"), "max-age=300");
    assert.equal(jwks.headers.get("access-control-allow-origin"), null);
    assert.deepEqual(await jwks.json(), mesh.issuer.jwks());

    assert.equal(await svc.stop(), 0);
    await assert.rejects(Deno.stat(discoveryFile), Deno.errors.NotFound);
    assert.ok(svc.events.some((e) => e.event === "stopping"));
  } finally {
    await mesh.close();
  }
});

Deno.test("service - a restart keeps the pin; a different --idp is refused", async () => {
  const mesh = await startServiceMesh();
  try {
    await (await mesh.start()).stop();
    const again = await mesh.start([
      "--root",
      mesh.root,
      "--space",
      mesh.space,
      "--server",
      mesh.broker.url,
      "--port",
      "0",
    ]);
    assert.equal(await again.stop(), 0);
    const moved = await mesh.start([
      "--root",
      mesh.root,
      "--space",
      mesh.space,
      "--server",
      mesh.broker.url,
      "--idp",
      "http://127.0.0.1:1/elsewhere",
    ]).catch((e) => e);
    assert.equal(moved.code, 2);
    assert.match(moved.message, /idp_pin_conflict/);
  } finally {
    await mesh.close();
  }
});

Deno.test("service - missing auth material is listed in one refusal (exit 2)", async () => {
  const root = await tempDir("cotal-auth-empty-");
  const space = "nothing-here";
  const flags = denoRunFlags("cotal-auth-service", {
    root,
    broker: ["127.0.0.1:4222"],
    authListen: "127.0.0.1:0",
    spaceKey: `space.${spaceKeyHex(space)}`,
  });
  const failed = await spawnService(flags, [
    "--root",
    root,
    "--space",
    space,
    "--server",
    "nats://127.0.0.1:4222",
  ], authServicePaths(root, space).discoveryFile).catch((e) => e);
  assert.equal(failed.code, 2);
  for (
    const c of [
      "callout_missing",
      "service_keys_missing",
      "issuer_missing",
      "owner_secret_missing",
      "idp_pin_missing",
    ]
  ) assert.match(failed.message, new RegExp(c));
  assert.match(failed.message, /auth_material_missing/);
});

Deno.test("service - usage refusals: a non-loopback listen address, a missing --space", async () => {
  const root = await tempDir("cotal-auth-usage-");
  const flags = denoRunFlags("cotal-auth-service", { root, broker: ["127.0.0.1:4222"] });
  const file = authServicePaths(root, "x").discoveryFile;
  const wide = await spawnService(flags, [
    "--space",
    "x",
    "--server",
    "nats://127.0.0.1:4222",
    "--listen",
    "0.0.0.0:8080",
  ], file).catch((e) => e);
  assert.equal(wide.code, 2);
  assert.match(wide.message, /loopback/);
  const noSpace = await spawnService(flags, ["--server", "nats://127.0.0.1:4222"], file).catch((
    e,
  ) => e);
  assert.equal(noSpace.code, 2);
  assert.match(noSpace.message, /--space is required/);
});

Deno.test("service - a killed daemon's stale auth-service.json is replaced, never reused", async () => {
  const mesh = await startServiceMesh();
  try {
    const first = await mesh.start();
    first.child.kill("SIGKILL");
    await first.stop();
    const { discoveryFile } = authServicePaths(mesh.root, mesh.space);
    // The crash left its file (pid and cap of a dead process) behind.
    assert.equal((await readDiscoveryFile(discoveryFile))?.cap, first.discovery.cap);
    const second = await mesh.start();
    assert.notEqual(second.discovery.cap, first.discovery.cap);
    assert.equal(second.discovery.pid, second.child.pid);
    const stale = await fetch(`${second.discovery.url}/exchange`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${first.discovery.cap}`,
        "content-type": "application/json",
      },
      body: "{}",
    });
    assert.equal(stale.status, 401, "the dead process's capability opens nothing");
    await stale.body?.cancel();
    assert.equal(await second.stop(), 0);
  } finally {
    await mesh.close();
  }
});

Deno.test("service - the callout comes back after a broker restart", async () => {
  const mesh = await startServiceMesh();
  try {
    const svc = await mesh.start();
    await mesh.grant("alice");
    const r = await mesh.exchange(svc, { idpToken: await mesh.idp.sign(), actor: "alice" });
    const bearer = r.body.token as string;
    await (await mesh.connectUser(bearer)).close();
    const health = async () => {
      const res = await fetch(`${svc.discovery.url}/health`);
      await res.body?.cancel();
      return res.status;
    };
    // While the broker is down the service says so: the callout cannot answer.
    await mesh.restartBroker(() =>
      waitFor(async () => (await health()) === 503, { what: "health to report 503" })
    );
    await waitFor(async () => (await health()) === 200, {
      timeoutMs: 20_000,
      what: "health to recover",
    });
    let nc: NatsConnection | undefined;
    await waitFor(async () => {
      nc = await mesh.connectUser(bearer).catch(() => undefined);
      return nc !== undefined;
    }, { timeoutMs: 20_000, what: "a callout connect after the broker restart" });
    await nc!.close();
    assert.equal(svc.child.pid, svc.discovery.pid);
    assert.equal(await svc.stop(), 0);
  } finally {
    await mesh.close();
  }
});
