/**
 * cotal-supervise as a real process under its own permission row (`deno run
 * <denoRunFlags("cotal-supervise")> cmd/supervise.ts`, what `cotal up` runs): it re-signs the
 * daemon creds in its store at start, reports the isolation in force, and its agents outlive
 * its restarts: SIGTERM stops them and keeps them on the roster, a SIGKILL leaves them to the
 * successor, and either way the next start clears what was left (sockets, cgroups, dirs) and
 * brings them back with the same lifecycle; only a despawn ends one.
 */
import assert from "node:assert/strict";
import { denoRunFlags } from "../../lib/permissions.ts";
import { agentSocketDir, cgroupUnique } from "../../lib/manager/agent_setup.ts";
import { cgroupName, probeCgroups } from "../../lib/manager/sandbox/cgroup.ts";
import { managerInstanceId } from "../../lib/manager/manager_types.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { parseCreds } from "../../lib/nats/creds.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";
import { mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { connectBroker } from "../../lib/wire/connect.ts";
import { dmDurableName, streamNames } from "../../lib/wire/resources.ts";
import { deliveryCredsKey, spaceKeyHex } from "../../lib/workspace/keys.ts";
import { waitFor } from "../_harness/broker.ts";
import { testBwrap } from "./_agent_fixture.ts";
import { type ManagerMesh, processesMentioning, startManagerMesh } from "./_manager_mesh.ts";
import { agentDirOf } from "../../lib/manager/sandbox/isolation.ts";

async function supervise(mesh: ManagerMesh): Promise<Deno.ChildProcess> {
  const bwrap = await testBwrap();
  const layout = { root: mesh.root, broker: [mesh.url.replace("nats://", "")] };
  const flags = denoRunFlags("cotal-supervise", {
    ...layout,
    supervisorPrograms: [Deno.execPath(), bwrap],
    agentSocketDir: agentSocketDir(layout, managerInstanceId(mesh.root, mesh.space)),
  });
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...flags,
      `--config=${new URL("../../deno.json", import.meta.url).pathname}`,
      new URL("../../cmd/supervise.ts", import.meta.url).pathname,
      "--root",
      mesh.root,
      "--space",
      mesh.space,
      "--server",
      mesh.url,
      "--isolation",
      "bwrap",
    ],
    clearEnv: true,
    env: {
      PATH: "/usr/bin:/bin",
      HOME: Deno.env.get("HOME") ?? "/root",
      COTAL_BWRAP: bwrap,
    },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  return child;
}

async function stderrOf(child: Deno.ChildProcess): Promise<string> {
  return new TextDecoder().decode((await child.output()).stderr);
}

async function dmExists(mesh: ManagerMesh, uid: string, actor: string): Promise<boolean> {
  const nc = await connectBroker({
    servers: mesh.url,
    creds: await mintCreds(mesh.auth, newIdentity(), "provisioner"),
  });
  try {
    const jsm = await nc.jetstreamManager();
    return await jsm.consumers.info(
      streamNames(mesh.space).dm,
      dmDurableName({ owner: "local", actor }, uid),
    ).then(() => true, () => false);
  } finally {
    await nc.close();
  }
}

async function subjectOf(creds: string): Promise<{ sub: string; iat: number; jwt: string }> {
  const { jwt } = await parseCreds(creds);
  const c = decodeJwtUnverified(jwt);
  return { sub: c.sub, iat: c.iat, jwt };
}

Deno.test("manager - cotal-supervise under its row: re-signs daemon creds, reports isolation, never leaves agents behind", async () => {
  await using mesh = await startManagerMesh("svc");
  // A stored delivery cred: the supervisor re-signs it for the same nkey. (A second later, so
  // the new JWT's iat differs: a re-sign within the same second is byte-identical.)
  const delivery = newIdentity();
  const old = await mintCreds(mesh.auth, delivery, "delivery");
  const key = deliveryCredsKey(mesh.space, { root: mesh.root });
  await mesh.store.put(key, old);
  await new Promise((r) => setTimeout(r, 1_100));

  let sup = await supervise(mesh);
  const ctl = await mesh.control();
  let status: { isolation: string; pid: number } | undefined;
  await waitFor(async () => {
    status = await ctl.request<{ isolation: string; pid: number }>("status", {}, {
      timeoutMs: 1_000,
    }).catch(() => undefined);
    return status !== undefined;
  }, { timeoutMs: 30_000, what: "the supervisor answering status" });
  assert.equal(status!.pid, sup.pid);
  assert.match(
    status!.isolation,
    /^bwrap \(.*\): allowlist root, .*seccomp.* \+ Deno permissions$/,
  );
  await waitFor(async () => (await mesh.store.get(key)) !== old, { what: "delivery re-signed" })
    .catch(async (e) => {
      sup.kill("SIGTERM");
      throw new Error(`${e.message}: ${await stderrOf(sup)}`);
    });
  const [before, after] = [await subjectOf(old), await subjectOf((await mesh.store.get(key))!)];
  assert.equal(after.sub, before.sub);
  assert.notEqual(after.jwt, before.jwt);

  const spawn = () =>
    ctl.request<AgentRow>("spawn", {
      name: "worker",
      role: "work",
      command: "/bin/cat",
    }, { timeoutMs: 40_000 });

  const ps = async () => (await ctl.request<{ agents: AgentRow[] }>("ps")).agents;
  const awaitStatus = (what: string) =>
    waitFor(
      async () =>
        (await ctl.request("status", {}, { timeoutMs: 1_000 }).catch(() => null)) !== null,
      { timeoutMs: 30_000, what },
    );
  const credsKey = (uid: string) => `space.${spaceKeyHex(mesh.space)}/agent.worker.${uid}.creds`;
  const dir = `${agentDirOf(mesh, mesh.space, "worker")}`;

  // A clean stop of the service (SIGTERM) stops every agent but keeps its lifecycle on the
  // roster: runner gone, durables and creds kept for the next start.
  const row = await spawn();
  assert.ok(processesMentioning(dir).length > 0);
  assert.ok(await dmExists(mesh, row.lifecycleUid, "worker"));
  sup.kill("SIGTERM");
  const log = await stderrOf(sup);
  assert.equal((await sup.status).code, 0, log);
  assert.match(log, /stopped worker \(kept on the roster\)/);
  assert.deepEqual(processesMentioning(dir), []);
  assert.ok(await dmExists(mesh, row.lifecycleUid, "worker"), "the durable waits for it");
  assert.ok(await mesh.store.get(credsKey(row.lifecycleUid)), "its lifecycle is kept");

  // The next start brings it back: same name, same lifecycle (its backlog with it).
  sup = await supervise(mesh);
  await awaitStatus("the second supervisor");
  await waitFor(
    async () => (await ps()).some((a) => a.name === "worker" && a.status === "running"),
    {
      timeoutMs: 30_000,
      what: "worker brought back",
    },
  );
  assert.equal((await ps()).find((a) => a.name === "worker")!.lifecycleUid, row.lifecycleUid);
  assert.ok(processesMentioning(dir).length > 0);

  // A crash (SIGKILL): the runner dies with it; its sockets and cgroups are left behind.
  sup.kill("SIGKILL");
  await sup.status;
  await sup.stderr.cancel();
  await waitFor(() => processesMentioning(dir).length === 0, { what: "the runner died with it" });
  const layout = { root: mesh.root, broker: [mesh.url.replace("nats://", "")] };
  const sockets = agentSocketDir(layout, managerInstanceId(mesh.root, mesh.space));
  assert.ok([...Deno.readDirSync(sockets)].length > 0, "sockets left by the crash");
  const host = probeCgroups();
  const groups = host
    ? Object.values(host.parents).map((p) =>
      `${p}/${cgroupName("worker", cgroupUnique(row.lifecycleUid))}`
    )
    : [];
  for (const g of groups) assert.ok(Deno.statSync(g).isDirectory, `${g} left by the crash`);

  // The successor proves the crashed one dead (its lease at once), clears what it left (a
  // stale socket or cgroup would refuse the same agent's new sandbox) and brings worker back.
  sup = await supervise(mesh);
  await awaitStatus("the third supervisor (taking over the crashed one's lease)");
  await waitFor(
    async () => (await ps()).some((a) => a.name === "worker" && a.status === "running"),
    {
      timeoutMs: 30_000,
      what: "worker brought back after the crash",
    },
  );
  assert.equal((await ps()).find((a) => a.name === "worker")!.lifecycleUid, row.lifecycleUid);

  // A despawn ends the lifecycle: durables, creds, dir, sockets and cgroups gone.
  await ctl.request("despawn", { name: "worker" }, { timeoutMs: 30_000 });
  assert.deepEqual(await ps(), []);
  assert.equal(await dmExists(mesh, row.lifecycleUid, "worker"), false);
  assert.equal(await mesh.store.get(credsKey(row.lifecycleUid)), undefined);
  await assert.rejects(Deno.stat(dir), Deno.errors.NotFound);
  assert.deepEqual([...Deno.readDirSync(sockets)].map((e) => e.name), [], "sockets removed");
  for (const g of groups) assert.throws(() => Deno.statSync(g), Deno.errors.NotFound);
  sup.kill("SIGTERM");
  const last = await stderrOf(sup);
  assert.match(last, /brought worker back \(same lifecycle\)/);
  // The crashed one's lease row was still in the bucket (10 s TTL); its holder lock proved it
  // dead, so the successor did not wait the row out.
  assert.match(last, /took the lease over from pid \d+, which is gone/);
});
