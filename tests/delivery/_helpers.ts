/**
 * A real operator-mode space for the delivery tests: broker from our serverConfig, streams and
 * buckets from setupSpaceStreams, a workspace store holding the trust records and every daemon
 * cred, agents provisioned through provisionAgent, and the daemon started as a real process
 * under its own permission row. Not a test file (leading underscore).
 */
import { AckPolicy, connect, type JsMsg, type NatsConnection } from "nats";
import { startTestBroker, tempDir, type TestBroker, uniqueSpace } from "../_harness/broker.ts";
import {
  createSpaceAuth,
  credsAuthenticatorFast,
  mintConnectionEvictorCreds,
  mintCreds,
  mintMembershipObserverCreds,
  type MintOpts,
  newIdentity,
  type Profile,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
  serverConfig,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import {
  BROKER_AUTH_KEY,
  connectionEvictorCredsKey,
  deliveryCredsKey,
  membershipObserverCredsKey,
  membershipRwCredsKey,
  type SecretStore,
  spaceAccountKey,
  spaceKeyHex,
  workspaceSecretStore,
} from "../../lib/workspace/mod.ts";
import {
  buildMessage,
  type CotalMessage,
  dlvDurableName,
  newLifecycleUid,
  type Principal,
  provisionAgent,
  publishMessage,
  setupSpaceStreams,
  streamNames,
} from "../../lib/wire/mod.ts";
import { decodeFrame } from "../../lib/delivery/mod.ts";
import {
  deliveryLockPath,
  denoRunFlags,
  type DeploymentLayout,
  ENTRY_POINTS,
  type Executable,
} from "../../lib/permissions.ts";
import { resignedFor } from "../_harness/short_creds.ts";

/** One provisioned agent. */
export interface Agent {
  name: string;
  principal: Principal;
  id: string;
  uid: string;
  creds: string;
}

/** A space on its own broker, with a workspace root holding its store. */
export interface DeliverySpace {
  space: string;
  auth: SpaceAuth;
  broker: TestBroker;
  /** kill -9 of the broker (its JetStream store is kept). */
  killBroker(): Promise<void>;
  /** A new broker on the same port and store. */
  startBroker(): Promise<void>;
  url: string;
  /** The workspace state directory; its store is `<root>/secrets`. */
  root: string;
  store: SecretStore;
  deliveryCreds: string;
  mint(profile: Profile, opts?: MintOpts): Promise<string>;
  agent(
    name: string,
    opts?: { allowSubscribe?: string[]; allowPublish?: string[]; role?: string },
  ): Promise<Agent>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Puts every record and cred a daemon of `space` may read into `store`. */
export async function fillStore(
  store: SecretStore,
  auth: SpaceAuth,
  opts: { deliveryTtl?: number; sys?: boolean } = {},
): Promise<string> {
  const c = { injected: true } as const;
  // A delivery TTL below the policy minimum is re-signed, as an embedder's issuer may.
  const minted = await mintCreds(auth, newIdentity(), "delivery");
  const delivery = opts.deliveryTtl ? await resignedFor(auth, minted, opts.deliveryTtl) : minted;
  await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(auth));
  await store.put(spaceAccountKey(auth.space), serializeSpaceAccountAuth(auth));
  await store.put(deliveryCredsKey(auth.space, c), delivery);
  await store.put(
    membershipRwCredsKey(auth.space, c),
    await mintCreds(auth, newIdentity(), "membership-rw"),
  );
  if (opts.sys !== false) {
    await store.put(
      membershipObserverCredsKey(auth.space, c),
      await mintMembershipObserverCreds(auth, newIdentity()),
    );
    await store.put(
      connectionEvictorCredsKey(auth.space, c),
      await mintConnectionEvictorCreds(auth, newIdentity()),
    );
  }
  return delivery;
}

/** Starts a broker for a fresh space, sets it up and fills a workspace store. */
export async function startDeliverySpace(
  opts: { prefix?: string; deliveryTtl?: number; sys?: boolean } = {},
): Promise<DeliverySpace> {
  const space = uniqueSpace(opts.prefix ?? "dlv");
  const auth = await createSpaceAuth(space);
  const render = ({ port, storeDir }: { port: number; storeDir: string }) =>
    serverConfig(auth, [auth], { port, storeDir });
  let broker = await startTestBroker({ config: render });
  const { port, storeDir } = broker;
  let keptStore: string | undefined;
  const url = broker.url;
  const mint = (profile: Profile, o?: MintOpts) => mintCreds(auth, newIdentity(), profile, o);
  await setupSpaceStreams({ servers: url, space, creds: await mint("provisioner") });
  const root = await tempDir("cotal-dlv-root-");
  const store = workspaceSecretStore(root);
  const deliveryCreds = await fillStore(store, auth, opts);
  return {
    space,
    auth,
    get broker() {
      return broker;
    },
    async killBroker() {
      keptStore = storeDir;
      Deno.kill(broker.process.pid, "SIGKILL");
      await broker.process.exited;
    },
    async startBroker() {
      broker = await startTestBroker({ config: render, port, storeDir });
    },
    url,
    root,
    store,
    deliveryCreds,
    mint,
    async agent(name, o = {}) {
      const identity = newIdentity();
      const principal = { owner: "local", actor: name };
      const uid = newLifecycleUid();
      const allowSubscribe = o.allowSubscribe ?? ["general"];
      const p = await provisionAgent({
        servers: url,
        creds: await mint("provisioner"),
        space,
        auth,
        identity,
        principal,
        lifecycleUid: uid,
        subscribe: [],
        allowSubscribe,
        allowPublish: o.allowPublish ?? allowSubscribe.filter((c) => !/[*>]/.test(c)),
        ...(o.role ? { role: o.role } : {}),
      });
      return { name, principal, id: `local.${name}`, uid, creds: p.creds };
    },
    async [Symbol.asyncDispose]() {
      await broker.stop();
      if (keptStore) await Deno.remove(keptStore, { recursive: true }).catch(() => {});
    },
  };
}

/** Connects with creds and the per-connection inbox prefix the grants expect. */
/** The user key a creds file's JWT names (its `_INBOX_<key>` is that cred's inbox prefix). */
export function credSubject(creds: string): string {
  const jwt = /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(creds)![1];
  return JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
}

export function connectAs(
  url: string,
  creds: string,
  opts: { reconnect?: boolean; name?: string } = {},
) {
  return connect({
    servers: url,
    authenticator: credsAuthenticatorFast(creds),
    inboxPrefix: `_INBOX_${credSubject(creds)}`,
    reconnect: opts.reconnect ?? false,
    name: opts.name ?? "cotal-test",
  });
}

/** Posts a text message on `channel` as `agent`. */
export async function post(
  nc: NatsConnection,
  space: string,
  agent: Agent,
  channel: string,
  text: string,
): Promise<CotalMessage> {
  const msg = buildMessage({ space, from: { id: agent.id, name: agent.name }, channel, text });
  await publishMessage(nc, msg);
  return msg;
}

/** Binds the agent's `dlv_` durable and drains it until idle; returns the framed messages. */
export async function drainDlv(
  nc: NatsConnection,
  space: string,
  agent: Agent,
  opts: { idleMs?: number; until?: number; timeoutMs?: number } = {},
): Promise<{ messages: CotalMessage[]; channels: string[] }> {
  const js = nc.jetstream();
  const c = await js.consumers.get(
    streamNames(space).dlv,
    dlvDurableName(agent.principal, agent.uid),
  );
  const messages: CotalMessage[] = [];
  const channels: string[] = [];
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  let idleRounds = 0;
  while (Date.now() < deadline) {
    const batch = await c.fetch({ max_messages: 500, expires: opts.idleMs ?? 1000 });
    let got = 0;
    for await (const m of batch) {
      got++;
      const f = decodeFrame(m.headers, m.data);
      if (f.ok) {
        messages.push(f.frame.msg);
        channels.push(f.frame.channel);
      }
      m.ack();
    }
    if (got === 0) {
      if (opts.until === undefined || messages.length >= opts.until) idleRounds++;
      if (idleRounds >= 1 && (opts.until === undefined || messages.length >= opts.until)) break;
    } else idleRounds = 0;
  }
  await nc.flush();
  return { messages, channels };
}

/** The ids in `messages` once each (what an endpoint surfaces after coalescing by id). */
export function uniqueIds(messages: CotalMessage[]): string[] {
  return [...new Set(messages.map((m) => m.id))];
}

/** A started daemon process. */
export interface DaemonProcess {
  child: Deno.ChildProcess;
  /** Everything it has written to stderr so far. */
  stderr(): string;
  waitForLine(re: RegExp, timeoutMs?: number): Promise<string>;
  exited: Promise<Deno.CommandStatus>;
  kill(signal?: Deno.Signal): void;
}

/**
 * Starts cmd/delivery.ts as a real process under the cotal-delivery permission row for this
 * workspace layout: it can read only its space's store directory, never the signer.
 */
export function startDaemonProcess(s: DeliverySpace, extra: string[] = []): DaemonProcess {
  const port = new URL(s.url).port;
  const layout = {
    root: s.root,
    broker: [`127.0.0.1:${port}`],
    spaceKey: `space.${spaceKeyHex(s.space)}`,
  };
  // The holder lock `cotal up` gives it, in the dir `up` makes.
  const lock = deliveryLockPath(layout, layout.spaceKey);
  Deno.mkdirSync(lock.slice(0, lock.lastIndexOf("/")), { recursive: true, mode: 0o700 });
  return startExecutable("cotal-delivery", layout, [
    "--space",
    s.space,
    "--server",
    s.url,
    "--root",
    s.root,
    "--lock-file",
    lock,
    ...extra,
  ]);
}

/** Starts one of Cotal's executables as a real process under its permission row for `layout`. */
export function startExecutable(
  exe: Executable,
  layout: DeploymentLayout,
  args: string[],
): DaemonProcess {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      ...denoRunFlags(exe, layout),
      new URL(`../../${ENTRY_POINTS[exe]}`, import.meta.url).pathname,
      ...args,
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let text = "";
  const listeners: (() => void)[] = [];
  const reading = (async () => {
    const dec = new TextDecoder();
    for await (const chunk of child.stderr) {
      text += dec.decode(chunk, { stream: true });
      for (const l of listeners.splice(0)) l();
    }
  })();
  const exited = child.status.then(async (st) => {
    await reading.catch(() => {});
    for (const l of listeners.splice(0)) l();
    return st;
  });
  let done = false;
  exited.then(() => done = true);
  return {
    child,
    stderr: () => text,
    async waitForLine(re, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = re.exec(text);
        if (m) return m[0];
        if (done) throw new Error(`the daemon exited before printing ${re}:\n${text}`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${re}:\n${text}`);
        await Promise.race([
          new Promise<void>((r) => listeners.push(r)),
          new Promise((r) => setTimeout(r, 200)),
        ]);
      }
    },
    exited,
    kill(signal: Deno.Signal = "SIGTERM") {
      if (!done) {
        try {
          child.kill(signal);
        } catch {
          // Already gone.
        }
      }
    },
  };
}

/** Reads every message currently in one agent's DLV subject without consuming (for asserts). */
export async function dlvCount(nc: NatsConnection, space: string, agent: Agent): Promise<number> {
  const jsm = await nc.jetstreamManager();
  const info = await jsm.consumers.info(
    streamNames(space).dlv,
    dlvDurableName(agent.principal, agent.uid),
  );
  return info.num_pending + info.num_ack_pending;
}

export type { JsMsg };
export { AckPolicy };

/**
 * Waits until the daemon has fanned out every CHAT message and judged every INBOX entry (its
 * two durables have nothing pending or in flight), read with the daemon's own cred.
 */
export async function waitSettled(s: DeliverySpace, timeoutMs = 20_000): Promise<void> {
  const nc = await connectAs(s.url, s.deliveryCreds);
  try {
    const jsm = await nc.jetstreamManager();
    const names = streamNames(s.space);
    const idle = async (stream: string, durable: string) => {
      const i = await jsm.consumers.info(stream, durable);
      return i.num_pending === 0 && i.num_ack_pending === 0;
    };
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await idle(names.chat, "fanout") && await idle(names.inbox, "reader")) return;
      if (Date.now() > deadline) throw new Error("timed out waiting for the daemon to settle");
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await nc.close();
  }
}
