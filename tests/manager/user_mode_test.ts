/**
 * Manager user mode end to end: the real auth-service daemon under its permission row, the
 * broker's real auth callout, a Manager with `userAuth`, and an agent in its bwrap sandbox. The
 * agent is admitted on bearers the auth service issues for its ledger row (granted by the
 * supervisor, under the owner the service keeps for supervised agents); nothing it holds
 * connects by itself, no agent cred is stored, and despawn removes the row.
 */
import assert from "node:assert/strict";
import { connect, Events } from "nats";
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";
import type { CotalMessageEvent } from "../../lib/endpoint/events.ts";
import { isCotalError } from "../../lib/errors.ts";
import { Manager } from "../../lib/manager/manager.ts";
import { readLaunchMaterial } from "../../lib/manager/launch.ts";
import { supervisedOwner } from "../../lib/auth/agent_bearers.ts";
import {
  decodeJwtUnverified,
  parseCreds,
  parseRelayedCreds,
  publicKeyFromSeed,
  renderRelayedCreds,
} from "../../lib/nats/mod.ts";
import {
  credsAuthenticatorFast,
  mintCreds,
  newIdentity,
  nonceProver,
  requestProver,
  syncVerifier,
} from "../../lib/trust/mod.ts";
import { BrokerRelay } from "../../lib/manager/sandbox/relay.ts";
import { AgentBearers, agentDescriptorCreds } from "../../lib/manager/agent_bearers.ts";
import type { CotalMessage } from "../../lib/wire/envelope.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { provisionAgent } from "../../lib/wire/provision.ts";
import { waitFor } from "../_harness/broker.ts";
import { startServiceMesh } from "../auth/_service_mesh.ts";
import { testBwrap } from "./_agent_fixture.ts";

Deno.test("manager user mode - an agent runs on auth-service bearers through the real callout, and despawn revokes its row", async () => {
  await testBwrap();
  const mesh = await startServiceMesh({ streams: true });
  const closers: (() => Promise<unknown>)[] = [];
  try {
    const svc = await mesh.start();
    const logs: string[] = [];
    const manager = new Manager({
      space: mesh.space,
      servers: mesh.broker.url,
      workspaceRoot: mesh.root,
      layout: { machineHome: `${mesh.root}/home/.cotal` },
      userAuth: { url: svc.discovery.url },
      log: (l) => logs.push(l),
    });
    await manager.start();
    closers.push(() => manager.stop());
    assert.equal(manager.status().agentAuth, "user");

    const row = await manager.spawn({
      agent: "task-runner",
      name: "upper",
      role: "shout",
      command: "/bin/sh",
      args: ["-c", "tr a-z A-Z"],
    });
    // Its presence appeared: its runner connected through its relay, on a bearer.
    assert.equal(row.present, true);
    const owner = await supervisedOwner(mesh.ownerSecret);
    assert.equal(row.id, `${owner}.upper`);
    const ledgerRow = await mesh.ledger.get(owner, "upper");
    assert.equal(ledgerRow?.lifecycleUid, row.lifecycleUid);
    assert.equal(ledgerRow?.label, "cotal-supervise");
    assert.deepEqual(ledgerRow?.scope, []);
    await svc.waitEvent((e) =>
      e.event === "callout" && e.outcome === "allow" && e.principal === `${owner}.upper`
    );

    // No agent cred in the store, and the launch file's JWT connects nowhere by itself.
    const keys = await listKeys(`${mesh.root}`);
    assert.equal(keys.filter((k) => k.includes("agent.upper.")).length, 0, keys.join(", "));
    const launchFile = `${mesh.root}/agents/${mesh.space}/upper/launch.json`;
    const launch = await readLaunchMaterial(await findLaunch(mesh.root, "upper") ?? launchFile);
    assert.equal(launch.auth.kind, "creds");
    const text = (launch.auth as { creds: string }).creds;
    // Its JWT alone, and the stand-in seed its relay checks callers with: not the JWT's key.
    const { jwt, standInSeed } = parseRelayedCreds(text);
    const claims = decodeJwtUnverified(jwt);
    assert.notEqual(await publicKeyFromSeed(standInSeed!), claims.sub);
    assert.notEqual(claims.iss, mesh.auth.account.pub);
    assert.equal(claims.exp, undefined, "nothing in the launch file expires: its bearers do");
    assert.deepEqual((claims.nats as { sub?: { allow?: string[] } }).sub?.allow, [
      `_INBOX_${claims.sub}.>`,
    ]);
    for (const authenticator of [credsAuthenticatorFast(text)]) {
      await assert.rejects(
        connect({ servers: mesh.broker.url, authenticator, reconnect: false, timeout: 3_000 }),
        (e: Error) => /authorization|authentication/i.test(e.message),
        `the launch JWT ${jwt.slice(0, 12)}… is refused by the broker`,
      );
    }

    // A task round trip: the agent's grants come from its ledger row through the callout.
    const client = await staticClient(mesh, "asker");
    closers.push(() => client.ep.stop());
    const task = await client.ep.anycast("shout", "hello in user mode");
    await waitFor(() => client.dms.some((m) => m.replyTo === task.id), {
      what: "the task's result DM",
      timeoutMs: 30_000,
    });
    const result = client.dms.find((m) => m.replyTo === task.id)!;
    assert.equal(result.from.id, `${owner}.upper`);
    assert.equal((result.parts[0] as { text: string }).text.trim(), "HELLO IN USER MODE");

    const gone = await manager.despawn("upper");
    assert.ok(gone.durablesRemoved.length > 0, JSON.stringify(gone));
    assert.equal(await mesh.ledger.get(owner, "upper"), undefined, "despawn revoked the row");
  } finally {
    for (const c of closers.reverse()) await c().catch(() => {});
    await mesh.close();
  }
});

Deno.test("manager user mode - a manager whose auth service does not answer refuses to start, naming it", async () => {
  await testBwrap();
  const mesh = await startServiceMesh({ streams: true });
  try {
    const manager = new Manager({
      space: mesh.space,
      servers: mesh.broker.url,
      workspaceRoot: mesh.root,
      layout: { machineHome: `${mesh.root}/home/.cotal` },
      // Nothing listens here.
      userAuth: { url: "http://127.0.0.1:9" },
      log: () => {},
    });
    await assert.rejects(
      manager.start(),
      (e) => isCotalError(e, "agent_bearer_unavailable") && /did not answer/.test(e.message),
    );
  } finally {
    await mesh.close();
  }
});

async function staticClient(
  mesh: Awaited<ReturnType<typeof startServiceMesh>>,
  actor: string,
): Promise<{ ep: CotalEndpoint; dms: CotalMessage[] }> {
  const identity = newIdentity();
  const lifecycleUid = newLifecycleUid();
  const p = await provisionAgent({
    servers: mesh.broker.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "provisioner"),
    space: mesh.space,
    auth: mesh.auth,
    identity,
    principal: { owner: "local", actor },
    lifecycleUid,
    allowSubscribe: [],
  });
  const ep = new CotalEndpoint({
    servers: mesh.broker.url,
    space: mesh.space,
    card: { name: actor },
    lifecycleUid,
    creds: p.creds,
  });
  const dms: CotalMessage[] = [];
  ep.addEventListener("message", (ev: CotalMessageEvent) => {
    if (ev.meta.source === "dm") dms.push(ev.message);
  });
  await ep.start();
  return { ep, dms };
}

async function listKeys(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory) await walk(p);
      else out.push(p.slice(dir.length + 1));
    }
  };
  await walk(dir).catch(() => {});
  return out.filter((k) => !k.startsWith("agents/"));
}

async function findLaunch(root: string, name: string): Promise<string | undefined> {
  const all: string[] = [];
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory) await walk(p);
      else if (e.name === "launch.json" && p.includes(`/${name}/`)) all.push(p);
    }
  };
  await walk(`${root}/agents`).catch(() => {});
  return all[0];
}

Deno.test("manager user mode - cotal-supervise refuses an --auth-service that is not a loopback http URL, exit 2", async () => {
  const entry = new URL("../../cmd/supervise.ts", import.meta.url).pathname;
  for (
    const bad of [
      "ftp://127.0.0.1:8081",
      "http://203.0.113.5:8081",
      "http://127.0.0.1:8081/exchange",
      "not a url",
    ]
  ) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", entry, "--root", "/tmp/none", "--space", "s", "--auth-service", bad],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 2, err);
    assert.match(err, /--auth-service must be the auth service's loopback URL .*\[usage\]/, bad);
  }
});

Deno.test("manager user mode - when its bearer expires the broker drops the agent's connection, and its relay readmits it on the fresh one", async () => {
  const mesh = await startServiceMesh({ streams: true });
  const svc = await mesh.start();
  let relay: BrokerRelay | undefined;
  let renewal: ReturnType<typeof setInterval> | undefined;
  try {
    const owner = await supervisedOwner(mesh.ownerSecret);
    const identity = newIdentity();
    const standIn = newIdentity();
    const lifecycleUid = newLifecycleUid();
    const principal = { owner, actor: "shortlived" };
    await mesh.ledger.grant({
      ...principal,
      subscribe: [],
      allowSubscribe: ["general"],
      allowPublish: ["general"],
      lifecycleUid,
    });
    // Bearers of 4 s, renewed every second (the supervisor's live 900 s, renewed at half
    // life): each connect is presented the one of that moment.
    const issue = async () =>
      (await mesh.issuer.issue({ space: mesh.space, ...principal, lifecycleUid, ttlSec: 4 }))
        .token;
    let current = await issue();
    renewal = setInterval(async () => current = await issue(), 1_000);
    const sentinel = await parseCreds(mesh.callout.sentinelCreds);
    relay = BrokerRelay.listenLoopback([mesh.broker.url], {
      inboxPrefix: `_INBOX_${identity.id}`,
      proveKey: nonceProver(identity.seed),
      callerKey: { verify: syncVerifier(standIn.id) },
      bearer: {
        sentinelJwt: sentinel.jwt,
        sign: nonceProver(sentinel.seed).sign,
        connId: identity.id,
        current: () => current,
      },
    });
    const plan = { identity, principal } as Parameters<typeof agentDescriptorCreds>[0];
    const text = renderRelayedCreds(
      (await parseCreds(await agentDescriptorCreds(plan))).jwt,
      standIn.seed,
    );
    const nc = await connect({
      servers: `nats://127.0.0.1:${relay.port}`,
      authenticator: credsAuthenticatorFast(text),
      inboxPrefix: `_INBOX_${identity.id}`,
      name: "agent",
      maxReconnectAttempts: -1,
      reconnectTimeWait: 200,
    });
    const events: string[] = [];
    (async () => {
      for await (const s of nc.status()) events.push(String(s.type));
    })();
    // Past two expiries: dropped each time, back each time, and still working.
    await waitFor(() => events.filter((e) => e === Events.Reconnect).length >= 2, {
      what: "two reconnects past two bearer expiries",
      timeoutMs: 20_000,
    });
    await nc.flush();
    assert.equal(nc.isClosed(), false);
    const allows = svc.events.filter((e) =>
      e.event === "callout" && e.outcome === "allow" && e.principal === `${owner}.shortlived`
    );
    assert.ok(allows.length >= 3, `admitted ${allows.length} times`);
    await nc.close();
  } finally {
    clearInterval(renewal);
    relay?.close();
    await mesh.close();
  }
});

Deno.test("manager user mode - a root with the user-auth marker runs user mode on its running auth service, refuses without one, and userAuth: false opts out", async () => {
  await testBwrap();
  const mesh = await startServiceMesh({ streams: true });
  const make = (userAuth?: false) =>
    new Manager({
      space: mesh.space,
      servers: mesh.broker.url,
      workspaceRoot: mesh.root,
      layout: { machineHome: `${mesh.root}/home/.cotal` },
      ...(userAuth === false ? { userAuth } : {}),
      log: () => {},
    });
  try {
    await Deno.writeTextFile(
      `${mesh.root}/user-auth.json`,
      JSON.stringify({ idp: mesh.idp.issuer }),
    );
    // The marker, and no auth service running: refused, not static creds.
    await assert.rejects(
      make().start(),
      (e) =>
        isCotalError(e, "agent_bearer_unavailable") &&
        /runs user auth \(user-auth\.json\), but space .* auth service is not running/.test(
          e.message,
        ),
    );
    const svc = await mesh.start();
    void svc;
    const m = make();
    await m.start();
    try {
      assert.equal(m.status().agentAuth, "user");
    } finally {
      await m.stop();
    }
    const plain = make(false);
    await plain.start();
    try {
      assert.equal(plain.status().agentAuth, "creds");
    } finally {
      await plain.stop();
    }
  } finally {
    await mesh.close();
  }
});

Deno.test("manager user mode - a relay presents only its own lifecycle's bearer, never its name's next one", async () => {
  const mesh = await startServiceMesh({ streams: true });
  try {
    const svc = await mesh.start();
    const principal = { owner: "local", actor: "manager_lifecycles" };
    const creds = await mintCreds(mesh.auth, newIdentity(), "supervisor", { principal });
    const bearers = await AgentBearers.open({
      url: svc.discovery.url,
      principal,
      prover: () => requestProver(creds),
      log: () => {},
    });
    const plan = (lifecycleUid: string) =>
      ({
        principal: { owner: bearers.owner, actor: "worker" },
        lifecycleUid,
        identity: newIdentity(),
        channels: { subscribe: [], allowSubscribe: [], allowPublish: [] },
      }) as unknown as Parameters<AgentBearers["grant"]>[0];
    const first = plan(newLifecycleUid());
    await bearers.grant(first);
    const old = bearers.presenter(first);
    assert.equal(typeof old.current(), "string");
    const next = plan(newLifecycleUid());
    await bearers.grant(next);
    assert.equal(old.current(), undefined, "the old lifecycle's relay gets no bearer");
    assert.equal(typeof bearers.presenter(next).current(), "string");
    bearers.close();
  } finally {
    await mesh.close();
  }
});
