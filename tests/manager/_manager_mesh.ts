/**
 * A real mesh for manager tests: a workspace root whose file store holds the space's trust
 * records, an operator-mode broker rendered from them, the space's streams, and helpers for a
 * client agent (to send tasks and receive results) and a control-rail client.
 */
import { startTestBroker, tempDir, type TestBroker, uniqueSpace } from "../_harness/broker.ts";
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";
import type { CotalMessageEvent } from "../../lib/endpoint/events.ts";
import { ManagerClient } from "../../lib/manager/control_client.ts";
import { Manager } from "../../lib/manager/manager.ts";
import type { ManagerOptions } from "../../lib/manager/manager_types.ts";
import { ensureBrokerAuth, ensureSpaceAccount } from "../../lib/mesh/trust_state.ts";
import {
  composeSpaceAuth,
  mintCreds,
  newIdentity,
  serverConfig,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import { provisionAgent } from "../../lib/wire/provision.ts";
import { setupSpaceStreams } from "../../lib/wire/streams.ts";
import type { CotalMessage } from "../../lib/wire/envelope.ts";
import {
  deliveryCredsKey,
  type FsSecretStore,
  workspaceSecretStore,
} from "../../lib/workspace/mod.ts";
import { testBwrap } from "./_agent_fixture.ts";
import { runDelivery } from "../../lib/delivery/mod.ts";

/** One test mesh. */
export interface ManagerMesh {
  readonly root: string;
  readonly space: string;
  readonly url: string;
  readonly auth: SpaceAuth;
  readonly store: FsSecretStore;
  readonly broker: TestBroker;
  /** kill -9 of the broker, then a new one on the same port and JetStream store. */
  restartBroker(): Promise<void>;
  /** kill -9 of the broker (its store is kept). */
  killBroker(): Promise<void>;
  /** A new broker on the same port and store. */
  startBroker(): Promise<void>;
  /** Layout overrides every manager in these tests uses (the machine home inside the root). */
  readonly layout: { machineHome: string };
  /** A started manager for this mesh (stopped by the mesh's dispose). */
  manager(opts?: Partial<ManagerOptions>): Promise<Manager>;
  /** A control-rail client (closed by the mesh's dispose). */
  control(): Promise<ManagerClient>;
  /** A provisioned, started client agent that records the DMs it receives. */
  client(actor: string): Promise<{ ep: CotalEndpoint; dms: CotalMessage[] }>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Starts a broker for a fresh root and space. */
export async function startManagerMesh(prefix = "mgr"): Promise<ManagerMesh> {
  await testBwrap();
  const root = `${await tempDir("cotal-mgrmesh-")}/.cotal`;
  await Deno.mkdir(root, { recursive: true, mode: 0o700 });
  const space = uniqueSpace(prefix);
  const store = workspaceSecretStore(root);
  const { broker } = await ensureBrokerAuth(store, "test");
  const { account } = await ensureSpaceAccount(store, broker, space);
  const auth = composeSpaceAuth(broker, account);
  const render = (c: { storeDir: string; port: number }) =>
    serverConfig(broker, [{ space, account: account.account }], {
      storeDir: c.storeDir,
      port: c.port,
    });
  let b = await startTestBroker({ config: render });
  let keptStore: string | undefined;
  const killBroker = async () => {
    keptStore = b.storeDir;
    Deno.kill(b.process.pid, "SIGKILL");
    await b.process.exited;
  };
  const startBroker = async () => {
    b = await startTestBroker({ config: render, port: b.port, storeDir: b.storeDir });
  };
  await setupSpaceStreams({
    servers: b.url,
    space,
    creds: await mintCreds(auth, newIdentity(), "provisioner"),
  });
  const managers: Manager[] = [];
  const closers: (() => Promise<unknown>)[] = [];
  const layout = { machineHome: `${root}/home/.cotal` };
  return {
    root,
    space,
    url: b.url,
    auth,
    store,
    get broker() {
      return b;
    },
    async restartBroker() {
      await killBroker();
      await startBroker();
    },
    killBroker,
    startBroker,
    layout,
    async manager(opts = {}) {
      const m = new Manager({
        space,
        servers: b.url,
        workspaceRoot: root,
        layout,
        log: () => {},
        ...opts,
      });
      await m.start();
      managers.push(m);
      return m;
    },
    async control() {
      const creds = await mintCreds(auth, newIdentity(), "control-caller", {
        principal: { owner: "local", actor: "operator" },
      });
      const c = await ManagerClient.connect({ servers: b.url, space, creds });
      closers.push(() => c.close());
      return c;
    },
    async client(actor) {
      const identity = newIdentity();
      const lifecycleUid = newLifecycleUid();
      const principal = { owner: "local", actor };
      const p = await provisionAgent({
        servers: b.url,
        creds: await mintCreds(auth, newIdentity(), "provisioner"),
        space,
        auth,
        identity,
        principal,
        lifecycleUid,
        allowSubscribe: [],
      });
      const ep = new CotalEndpoint({
        servers: b.url,
        space,
        card: { name: actor },
        lifecycleUid,
        creds: p.creds,
      });
      const dms: CotalMessage[] = [];
      ep.addEventListener("message", (ev: CotalMessageEvent) => {
        if (ev.meta.source === "dm") dms.push(ev.message);
      });
      await ep.start();
      closers.push(() => ep.stop());
      return { ep, dms };
    },
    async [Symbol.asyncDispose]() {
      for (const c of closers.splice(0)) await c().catch(() => {});
      for (const m of managers.splice(0)) await m.stop().catch(() => {});
      await b.stop();
      if (keptStore) await Deno.remove(keptStore, { recursive: true }).catch(() => {});
    },
  };
}

/** Pids of live processes whose command line mentions `needle`. */
export function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name) || Number(e.name) === Deno.pid) continue;
    try {
      const cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`);
      if (cmd.includes(needle)) out.push(Number(e.name));
    } catch {
      // Gone.
    }
  }
  return out;
}

/**
 * The space's delivery daemon in this process, as `cotal up` runs it (it answers the agents'
 * channel joins), silent; resolves with its stop.
 */
export async function startMeshDelivery(mesh: ManagerMesh): Promise<() => Promise<void>> {
  await mesh.store.put(
    deliveryCredsKey(mesh.space, { root: mesh.root }),
    await mintCreds(mesh.auth, newIdentity(), "delivery"),
  );
  const delivery = await runDelivery(
    { values: { space: mesh.space, server: mesh.url, root: mesh.root }, positionals: [], raw: [] },
    undefined,
    { log: { info: () => {}, warn: () => {}, error: () => {} } },
  );
  return () => delivery.stop();
}
