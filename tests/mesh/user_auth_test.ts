import assert from "node:assert/strict";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import { authServicePaths, loadCalloutAuth, readDiscoveryFile } from "../../lib/auth/mod.ts";
import { createActorLedger } from "../../lib/auth/ledger.ts";
import { deriveOwnerForIdpSubject } from "../../lib/auth/owner.ts";
import { loadOwnerSecret } from "../../lib/auth/secrets.ts";
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";
import { tail } from "../../lib/mesh/ops.ts";
import { down, up } from "../../lib/mesh/up.ts";
import { workspaceSecretStore } from "../../lib/workspace/mod.ts";
import { isCotalError } from "../../lib/errors.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";
import { startTestIdp } from "../_harness/idp.ts";
import { cotalIn } from "../_harness/cotal_cli.ts";
import { supervisedOwner } from "../../lib/auth/agent_bearers.ts";

Deno.test("mesh - up --user-auth: an IdP token becomes a bearer, the callout admits it, messages flow", async () => {
  const idp = await startTestIdp({ alg: "RS256" });
  const root = await tempDir("cotal-root-");
  const opts = {
    root,
    space: "ua",
    host: "127.0.0.1",
    port: freePort(),
    detach: true,
    say: () => {},
    untilStopped: Promise.resolve(),
    userAuth: { idp: idp.issuer, audience: idp.audience },
  };
  try {
    const r = await up(opts);
    assert.ok(r.started.includes("auth-service.ua"), JSON.stringify(r));
    await assert.rejects(
      up({ ...opts, userAuth: { idp: "https://other.example" } }),
      (e) => isCotalError(e, "user_auth_conflict"),
    );

    const store = workspaceSecretStore(root);
    const paths = authServicePaths(root, "ua");
    const owner = await deriveOwnerForIdpSubject(
      await loadOwnerSecret(store, "ua"),
      idp.issuer,
      idp.sub,
    );
    const row = await createActorLedger({ space: "ua", stateDir: paths.stateDir }).grant({
      owner,
      actor: "alice",
      subscribe: [],
      allowSubscribe: ["general"],
      allowPublish: ["general"],
    });
    const discovery = (await readDiscoveryFile(paths.discoveryFile))!;
    const bearer = async () => {
      const res = await fetch(`${discovery.url}/exchange`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${discovery.cap}` },
        body: JSON.stringify({ idpToken: await idp.sign(), actor: "alice", ttlSec: 300 }),
      });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      return body.token as string;
    };
    const seen: string[] = [];
    const ac = new AbortController();
    const ready = Promise.withResolvers<void>();
    const tailer = tail(root, "ua", (l) => seen.push(`${l.from}:${l.text}`), {
      signal: ac.signal,
      ready: ready.resolve,
    });
    await ready.promise;
    const ep = new CotalEndpoint({
      space: "ua",
      servers: r.url,
      card: { name: "alice", owner, actor: "alice" },
      lifecycleUid: row.lifecycleUid,
      bearer,
      sentinelCreds: (await loadCalloutAuth(store, "ua")).sentinelCreds,
      channels: ["general"],
      consume: false,
    });
    await ep.start();
    await ep.multicast("hello through the callout", { channel: "general" });
    await waitFor(() => seen.includes(`${owner}.alice:hello through the callout`), {
      what: "the user-mode post in tail",
    });
    await ep.stop();
    ac.abort();
    await tailer;

    // The space's supervisor runs in user mode: a spawned agent is admitted on bearers the
    // auth service issues, under the owner it keeps for supervised agents.
    const run = cotalIn(root);
    await run(
      "spawn",
      "--space",
      "ua",
      "--agent",
      "program",
      "--name",
      "worker",
      "--",
      "/bin/sleep",
      "600",
    );
    const rows = JSON.parse((await run("ps", "--space", "ua", "--json")).stdout).agents as {
      name: string;
      id: string;
      present: boolean;
    }[];
    const worker = rows.find((r) => r.name === "worker");
    const supervised = await supervisedOwner(await loadOwnerSecret(store, "ua"));
    assert.equal(worker?.id, `${supervised}.worker`, JSON.stringify(rows));
    assert.equal(worker?.present, true);
    assert.ok(
      await createActorLedger({ space: "ua", stateDir: paths.stateDir }).get(supervised, "worker"),
      "the worker's ledger row",
    );
    await run("despawn", "--space", "ua", "worker");
    assert.equal(
      await createActorLedger({ space: "ua", stateDir: paths.stateDir }).get(supervised, "worker"),
      undefined,
    );
  } finally {
    await down(root);
    await removeTempDir(root);
    await idp.close();
  }
});

Deno.test("mesh - up --user-auth without --idp, or --idp over plain http off loopback, is refused", async () => {
  const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;
  for (
    const [args, re] of [
      [["up", "--user-auth"], /--user-auth needs --idp/],
      [["up", "--user-auth", "--idp", "http://idp.example"], /must use https/],
      [["up", "--idp", "https://idp.example"], /go with --user-auth/],
    ] as const
  ) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, ...args],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 2, args.join(" "));
    assert.match(new TextDecoder().decode(out.stderr), re);
  }
});

Deno.test("mesh - a first up --user-auth whose IdP does not answer keeps no pin: the next plain up starts with static creds", async () => {
  const root = await tempDir("cotal-root-");
  const lines: string[] = [];
  const opts = {
    root,
    space: "ua",
    host: "127.0.0.1",
    port: freePort(),
    detach: true,
    say: (l: string) => lines.push(l),
    untilStopped: Promise.resolve(),
  };
  try {
    // Nothing listens on the IdP's port: the auth service never becomes ready.
    await assert.rejects(
      up({ ...opts, userAuth: { idp: `http://127.0.0.1:${freePort()}/` } }),
      (e) => isCotalError(e, "component_not_ready"),
    );
    assert.ok(lines.some((l) => /user auth was not kept/.test(l)), lines.join("\n"));
    await assert.rejects(Deno.stat(`${root}/user-auth.json`), Deno.errors.NotFound);
    // Nothing it started is left running, its watchdogs (started first) included.
    assert.deepEqual(processesMentioning(root), [], "a failed up leaves no process of its own");
    // Newcomer pass 8: every plain up after it failed on the same IdP.
    const r = await up(opts);
    assert.ok(!r.started.some((c) => c.startsWith("auth-service.")), JSON.stringify(r));
  } finally {
    await down(root).catch(() => {});
    await removeTempDir(root);
  }
});
