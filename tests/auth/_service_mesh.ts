/**
 * The auth-service daemon as a real process under its permission row: a `.cotal` root with
 * the space's trust records and auth kinds in the workspace store, an operator-mode broker
 * preloading the data and callout accounts, a real OIDC IdP on loopback, and helpers to
 * exchange, grant and connect.
 */
import { connect, type NatsConnection } from "nats";
import { ensureCalloutAuth } from "../../lib/auth/callout_store.ts";
import type { CalloutAuth } from "../../lib/auth/callout_auth.ts";
import { type ActorLedger, type ActorRow, createActorLedger } from "../../lib/auth/ledger.ts";
import type { UserTokenIssuer } from "../../lib/auth/issuer.ts";
import { deriveOwnerForIdpSubject } from "../../lib/auth/owner.ts";
import { ensureIssuer, ensureOwnerSecret } from "../../lib/auth/secrets.ts";
import {
  type AuthServiceDiscovery,
  authServicePaths,
  readDiscoveryFile,
} from "../../lib/auth/service_files.ts";
import { denoRunFlags } from "../../lib/permissions.ts";
import {
  createSpaceAuth,
  credsAuthenticatorFast,
  mintCreds,
  newIdentity,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
  serverConfig,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import { setupSpaceStreams } from "../../lib/wire/mod.ts";
import { workspaceSecretStore } from "../../lib/workspace/fs_secret_store.ts";
import { spaceKeyHex } from "../../lib/workspace/keys.ts";
import { BROKER_AUTH_KEY, spaceAccountKey } from "../../lib/workspace/trust_keys.ts";
import {
  startTestBroker,
  tempDir,
  type TestBroker,
  uniqueSpace,
  waitFor,
} from "../_harness/broker.ts";
import { startTestIdp, type TestIdp, type TestIdpAlg } from "../_harness/idp.ts";
import { nonce } from "./_callout_mesh.ts";

const ENTRY = new URL("../../cmd/auth-service.ts", import.meta.url).pathname;

/** A running daemon and what it logged. */
export interface ServiceProcess {
  child: Deno.ChildProcess;
  /** Parsed JSON log lines so far (stderr). */
  events: Record<string, unknown>[];
  /** Non-JSON stderr lines (usage errors, crashes). */
  text: string[];
  discovery: AuthServiceDiscovery;
  /** Wait for a logged event matching `pred` after index `from` (default: any). */
  waitEvent(
    pred: (e: Record<string, unknown>) => boolean,
    from?: number,
  ): Promise<Record<string, unknown>>;
  /** SIGTERM and the exit code. */
  stop(): Promise<number>;
}

/** One user-auth space with its daemon's inputs. */
export interface ServiceMesh {
  root: string;
  space: string;
  auth: SpaceAuth;
  callout: CalloutAuth;
  issuer: UserTokenIssuer;
  ownerSecret: Uint8Array;
  idp: TestIdp;
  broker: TestBroker;
  ledger: ActorLedger;
  /** The owner the IdP's default subject maps to. */
  owner: string;
  /** The daemon's `deno run` flags from its permission row. */
  flags: string[];
  /** Start the daemon (default args: pin the IdP, listen on a free loopback port). */
  start(extra?: string[]): Promise<ServiceProcess>;
  /** Grant `actor` to the IdP's default subject. */
  grant(actor: string, acl?: { sub?: string[]; pub?: string[] }): Promise<ActorRow>;
  /** POST /exchange. */
  exchange(
    svc: ServiceProcess,
    body: unknown,
    init?: { cap?: string | null; headers?: Record<string, string>; raw?: BodyInit },
  ): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }>;
  /** Connect through the callout with the sentinel creds and a bearer. */
  connectUser(bearer: string, opts?: { name?: string }): Promise<NatsConnection>;
  /**
   * Stop the broker, run `whileDown`, and start a fresh one on the same port (JetStream state
   * is not kept).
   */
  restartBroker(whileDown?: () => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

/** Build a root, a broker and an IdP; the daemon starts with `start()`. */
export async function startServiceMesh(
  opts: { alg?: TestIdpAlg; streams?: boolean } = {},
): Promise<ServiceMesh> {
  const space = uniqueSpace("svc");
  const root = await tempDir("cotal-auth-root-");
  const auth = await createSpaceAuth(space);
  const store = workspaceSecretStore(root);
  // The trust records sit where `cotal up` keeps them, so the denied signer dir is real.
  await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(auth));
  await store.put(spaceAccountKey(space), serializeSpaceAccountAuth(auth));
  const callout = await ensureCalloutAuth(store, auth);
  const issuer = await ensureIssuer(store, space);
  const ownerSecret = await ensureOwnerSecret(store, space);
  const idp = await startTestIdp({ alg: opts.alg ?? "EdDSA" });
  const config = ({ port, storeDir }: { port: number; storeDir: string }) =>
    serverConfig(auth, [auth], { storeDir, port, extraAccounts: [callout.account] });
  let broker = await startTestBroker({ config });
  if (opts.streams) {
    await setupSpaceStreams({
      servers: broker.url,
      space,
      creds: await mintCreds(auth, newIdentity(), "provisioner"),
    });
  }
  const paths = authServicePaths(root, space);
  const ledger = createActorLedger({ space, stateDir: paths.stateDir });
  const owner = await deriveOwnerForIdpSubject(ownerSecret, idp.issuer, idp.sub);
  const idpHost = new URL(idp.origin).host;
  const flags = denoRunFlags("cotal-auth-service", {
    root,
    broker: [`127.0.0.1:${broker.port}`],
    authListen: "127.0.0.1:0",
    authIdp: [idpHost],
    spaceKey: `space.${spaceKeyHex(space)}`,
  });
  const running: ServiceProcess[] = [];

  const mesh: ServiceMesh = {
    root,
    space,
    auth,
    callout,
    issuer,
    ownerSecret,
    idp,
    get broker() {
      return broker;
    },
    ledger,
    owner,
    flags,
    async start(extra) {
      const args = extra ?? [
        "--root",
        root,
        "--space",
        space,
        "--server",
        broker.url,
        "--listen",
        "127.0.0.1:0",
        "--idp",
        idp.issuer,
        "--audience",
        idp.audience,
      ];
      const svc = await spawnService(flags, args, paths.discoveryFile);
      running.push(svc);
      return svc;
    },
    grant(actor, acl = {}) {
      return ledger.grant({
        owner,
        actor,
        subscribe: [],
        allowSubscribe: acl.sub ?? ["general"],
        allowPublish: acl.pub ?? ["general"],
      });
    },
    async exchange(svc, body, init = {}) {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (init.cap !== null) headers.authorization = `Bearer ${init.cap ?? svc.discovery.cap}`;
      const res = await fetch(`${svc.discovery.url}/exchange`, {
        method: "POST",
        headers: { ...headers, ...init.headers },
        body: init.raw ?? JSON.stringify(body),
      });
      const text = await res.text();
      let parsed: Record<string, unknown> = {};
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = { text };
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
    connectUser(bearer, o = {}) {
      const name = o.name ?? nonce();
      return connect({
        servers: broker.url,
        authenticator: credsAuthenticatorFast(callout.sentinelCreds),
        token: bearer,
        name,
        inboxPrefix: `_INBOX_${name}`,
        reconnect: false,
      });
    },
    async restartBroker(whileDown) {
      const port = broker.port;
      await broker.stop();
      await whileDown?.();
      broker = await startTestBroker({ config, port });
    },
    async close() {
      for (const s of running) await s.stop().catch(() => {});
      await idp.close();
      await broker.stop();
    },
  };
  return mesh;
}

/** Run the daemon with `flags` and wait for its discovery file (or its exit). */
export async function spawnService(
  flags: string[],
  args: string[],
  discoveryFile: string,
): Promise<ServiceProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, ENTRY, ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    clearEnv: true,
    env: {
      NO_COLOR: "1",
      HOME: Deno.env.get("HOME") ?? "/root",
      // Lets a bench try V8 heap flags on the daemon without changing its permission row.
      ...(Deno.env.get("DENO_V8_FLAGS") ? { DENO_V8_FLAGS: Deno.env.get("DENO_V8_FLAGS")! } : {}),
      ...(Deno.env.get("MALLOC_ARENA_MAX")
        ? { MALLOC_ARENA_MAX: Deno.env.get("MALLOC_ARENA_MAX")! }
        : {}),
    },
  }).spawn();
  const events: Record<string, unknown>[] = [];
  const text: string[] = [];
  let exited: number | undefined;
  const status = child.status.then((s) => (exited = s.code));
  const readLines = async (stream: ReadableStream<Uint8Array>) => {
    let buf = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          events.push(JSON.parse(line));
        } catch {
          if (line.trim()) text.push(line);
        }
      }
    }
    if (buf.trim()) text.push(buf);
  };
  const pumps = Promise.all([readLines(child.stderr), readLines(child.stdout)]);
  let discovery: AuthServiceDiscovery | undefined;
  await waitFor(async () => {
    if (exited !== undefined) return true;
    if (!events.some((e) => e.event === "ready")) return false;
    discovery = await readDiscoveryFile(discoveryFile);
    return discovery !== undefined;
  }, { timeoutMs: 30_000, what: "the auth service to write auth-service.json" });
  const svc: ServiceProcess = {
    child,
    events,
    text,
    discovery: discovery!,
    async waitEvent(pred, from = 0) {
      let found: Record<string, unknown> | undefined;
      await waitFor(() => (found = events.slice(from).find(pred)) !== undefined, {
        timeoutMs: 15_000,
        what: "an auth-service log event",
      });
      return found!;
    },
    async stop() {
      if (exited === undefined) {
        try {
          child.kill("SIGTERM");
        } catch {
          // Already gone.
        }
      }
      const code = await status;
      await pumps.catch(() => {});
      return code;
    },
  };
  if (exited !== undefined) {
    await pumps.catch(() => {});
    throw Object.assign(new Error(`the auth service exited ${exited}: ${text.join("\n")}`), {
      svc,
      code: exited,
    });
  }
  return svc;
}
