/**
 * `runAuthService`: the auth-service daemon of one space. It loads its secrets through the
 * SecretStore (callout account, data-signer projection, bearer issuer, owner secret) and its
 * trust state from the state dir (IdP pin, actor ledger), connects and flushes the callout,
 * then serves the loopback HTTP face, and only then writes `auth-service.json` and resolves
 * with the running service (like `runDelivery`). Its `closed` resolves on a stop (SIGTERM,
 * SIGINT, the host's signal or `stop()`) and rejects when the broker connection dies.
 *
 * @module
 */

import { Events, type NatsConnection } from "nats";
import { connect } from "../nats/mod.ts";
import type { ParsedArgs } from "../command_types.ts";
import { CotalError, isCotalError } from "../errors.ts";
import { credsAuthenticatorFast, requestTrustOf } from "../trust/mod.ts";
import { createAgentBearerHandler, supervisedOwner } from "./agent_bearers.ts";
import { FsSecretStore, workspaceSecretStore } from "../workspace/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { type AuthCallout, type CalloutDecision, startAuthCallout } from "./callout.ts";
import { loadCalloutAuth, loadServiceKeys } from "./callout_store.ts";
import { freshReadStore } from "./fresh_reads.ts";
import { createIdpBridge } from "./idp_bridge.ts";
import { checkIdpUrl, discoverIdp } from "./idp_fetch.ts";
import { ensureIdpPin, type IdpPin, loadIdpPin } from "./idp_pin.ts";
import { createActorLedger } from "./ledger.ts";
import { loadIssuer, loadOwnerSecret } from "./secrets.ts";
import { authServicePaths, removeDiscoveryFile, writeDiscoveryFile } from "./service_files.ts";
import { type HttpServer, serveHttp } from "./http_server.ts";
import { type AuthServiceEvent, createExchangeHandler } from "./service_http.ts";

/** Extra controls for an embedding host. */
export interface RunAuthServiceOptions {
  /** Stop the service when aborted (as SIGTERM does). */
  signal?: AbortSignal;
}

interface Config {
  root: string;
  space: string;
  servers: string[];
  hostname: string;
  port: number;
  idp?: string;
  audience?: string;
  stateDir: string;
  discoveryFile: string;
}

/** A running auth service, as {@linkcode runAuthService} returns it once it serves. */
export interface AuthServiceDaemon {
  /** The space it serves. */
  readonly space: string;
  /** Its loopback HTTP face (`http://127.0.0.1:<port>`). */
  readonly url: string;
  /** Stops it: the callout and the HTTP face end, the discovery file is removed. */
  stop(): Promise<void>;
  /**
   * Settles once it has stopped: resolves after a stop (SIGTERM, SIGINT, `opts.signal`,
   * `stop()`), rejects with `auth_service_broker_lost` when the broker connection dies.
   */
  readonly closed: Promise<void>;
}

/**
 * Start the auth service and resolve once it serves: the callout answers, the HTTP face
 * listens, the discovery file is written. It runs until `stop()`, SIGTERM, SIGINT or
 * `opts.signal`. Secrets come from `store` (default the workspace store under `--root`); the
 * IdP pin and the ledger from the state dir.
 *
 * @example
 * ```ts
 * const svc = await runAuthService(
 *   { values: { root, space, server: brokerUrl, listen: "127.0.0.1:0" }, positionals: [], raw: [] },
 *   store,
 * );
 * console.log(svc.url); // a Manager's userAuth: { url: svc.url }
 * await svc.stop();
 * ```
 */
export async function runAuthService(
  args: ParsedArgs,
  store?: SecretStore,
  opts: RunAuthServiceOptions = {},
): Promise<AuthServiceDaemon> {
  const cfg = readConfig(args);
  const secrets = store ?? workspaceSecretStore(cfg.root);
  const log = (event: AuthServiceEvent) =>
    console.error(JSON.stringify({ ts: new Date().toISOString(), space: cfg.space, ...event }));
  // A file left by a dead predecessor must never pass for this instance's readiness.
  await removeDiscoveryFile(cfg.discoveryFile);
  const m = await loadMaterial(secrets, cfg);
  const nc = await connectCallout(cfg, m.callout.calloutCreds);
  let responder: AuthCallout | undefined;
  let server: HttpServer | undefined;
  const cap = randomHex(32);
  const stop = stopSignal(opts.signal);
  const cleanup = async () => {
    stop.dispose();
    await removeDiscoveryFile(cfg.discoveryFile, cap).catch(() => {});
    await server?.shutdown().catch(() => {});
    await responder?.stop().catch(() => {});
    await nc.close().catch(() => {});
  };
  let url: string;
  try {
    const ledger = createActorLedger({
      space: cfg.space,
      store: freshReadStore(new FsSecretStore(cfg.stateDir)),
    });
    responder = await startAuthCallout({
      nc,
      space: cfg.space,
      callout: m.callout,
      serviceKeys: m.serviceKeys,
      resolver: m.issuer.resolver(),
      ledger,
      onDecision: (d) => log(decisionEvent(d)),
    });
    // Readiness is only claimed once the broker has the subscription: the first connect
    // after `up` must find a responder.
    await nc.flush();
    const bridge = createIdpBridge({
      ...m.pin,
      space: cfg.space,
      ownerSecret: m.ownerSecret,
      ledger,
      tokenIssuer: m.issuer,
    });
    const agents = createAgentBearerHandler({
      space: cfg.space,
      trust: await requestTrustOf({ account: m.serviceKeys.dataAccount }),
      ledger,
      issuer: m.issuer,
      owner: await supervisedOwner(m.ownerSecret),
      sentinelCreds: m.callout.sentinelCreds,
      log,
    });
    m.ownerSecret.fill(0);
    let calloutUp = true;
    (async () => {
      for await (const s of nc.status()) {
        if (s.type === Events.Disconnect || s.type === Events.Reconnect) {
          calloutUp = s.type === Events.Reconnect;
          log({ event: "broker", state: calloutUp ? "reconnected" : "disconnected" });
        }
      }
    })().catch(() => {});
    const handler = createExchangeHandler({
      space: cfg.space,
      cap,
      issuer: m.issuer,
      bridge,
      log,
      calloutUp: () => calloutUp,
      agents,
    });
    server = listen(cfg, handler);
    const host = server.addr.hostname.includes(":")
      ? `[${server.addr.hostname}]`
      : server.addr.hostname;
    url = `http://${host}:${server.addr.port}`;
    await writeDiscoveryFile(cfg.discoveryFile, {
      ver: 1,
      space: cfg.space,
      url,
      pid: Deno.pid,
      cap,
    });
    log({ event: "ready", url, pid: Deno.pid, issuer: m.issuer.issuer, idp: m.pin.issuer });
  } catch (err) {
    await cleanup();
    throw err;
  }
  const closed = (async () => {
    try {
      const why = await Promise.race([
        stop.promise.then(() => "signal" as const),
        nc.closed().then((err) => err ?? new Error("the broker connection closed")),
      ]);
      if (why !== "signal") {
        log({ event: "fatal", error: why.message.slice(0, 200) });
        throw new CotalError(
          "auth_service_broker_lost",
          `The auth service lost its broker connection (${why.message.slice(0, 120)}); ` +
            "check the broker and restart the service.",
          { cause: why },
        );
      }
      const mem = Deno.memoryUsage();
      log({
        event: "stopping",
        rssMb: Math.round(mem.rss / 2 ** 20),
        heapMb: Math.round(mem.heapTotal / 2 ** 20),
        externalMb: Math.round(mem.external / 2 ** 20),
      });
    } finally {
      await cleanup();
    }
  })();
  // A host that only awaits stop() must not meet an unhandled rejection.
  closed.catch(() => {});
  return {
    space: cfg.space,
    url,
    stop() {
      stop.trigger();
      return closed.catch(() => {});
    },
    closed,
  };
}

function readConfig(args: ParsedArgs): Config {
  const v = args?.values ?? {};
  const str = (name: string): string | undefined => {
    const x = v[name];
    if (x === undefined) return undefined;
    if (typeof x !== "string" || x === "") usage(`--${name} needs a value`);
    return x;
  };
  const space = str("space");
  const server = str("server");
  if (space === undefined) usage("--space is required");
  if (server === undefined) usage("--server is required");
  const servers = server.split(",").map((s) => s.trim()).filter(Boolean);
  if (servers.length === 0 || !servers.every((s) => /^(nats|tls):\/\/[^\s/]+$/.test(s))) {
    usage("--server must be nats://host:port (comma-separated for a cluster)");
  }
  const listenArg = str("listen");
  const portArg = str("port");
  if (listenArg !== undefined && portArg !== undefined) usage("give --listen or --port, not both");
  const listenAt = listenArg ?? `127.0.0.1:${portArg ?? "0"}`;
  const m = /^(127\.0\.0\.1|localhost|\[::1\]):(\d{1,5})$/.exec(listenAt);
  if (!m || Number(m[2]) > 65535) {
    usage("--listen must be a loopback address 127.0.0.1:<port> or [::1]:<port> (port 0 = any)");
  }
  const root = (str("root") ?? `${Deno.cwd()}/.cotal`).replace(/\/+$/, "");
  const idp = str("idp");
  if (idp !== undefined) checkIdpUrl(idp, "--idp issuer URL");
  const paths = authServicePaths(root, space);
  const cfg: Config = {
    root,
    space,
    servers,
    hostname: m[1] === "[::1]" ? "::1" : m[1] === "localhost" ? "127.0.0.1" : m[1],
    port: Number(m[2]),
    stateDir: str("state-dir") ?? paths.stateDir,
    discoveryFile: paths.discoveryFile,
  };
  if (idp !== undefined) cfg.idp = idp;
  const audience = str("audience");
  if (audience !== undefined) cfg.audience = audience;
  return cfg;
}

function usage(detail: string): never {
  throw new CotalError("usage", `cotal-auth-service: ${detail}; run it with --help for the flags.`);
}

interface Material {
  callout: Awaited<ReturnType<typeof loadCalloutAuth>>;
  serviceKeys: Awaited<ReturnType<typeof loadServiceKeys>>;
  issuer: Awaited<ReturnType<typeof loadIssuer>>;
  ownerSecret: Uint8Array;
  pin: IdpPin;
}

/** Load everything; every missing piece is named in one refusal. */
async function loadMaterial(secrets: SecretStore, cfg: Config): Promise<Material> {
  const results = await Promise.allSettled([
    loadCalloutAuth(secrets, cfg.space),
    loadServiceKeys(secrets, cfg.space),
    loadIssuer(secrets, cfg.space),
    loadOwnerSecret(secrets, cfg.space),
    resolvePin(new FsSecretStore(cfg.stateDir), cfg),
  ]);
  const missing: string[] = [];
  for (const r of results) {
    if (r.status === "fulfilled") continue;
    if (isCotalError(r.reason) && r.reason.code.endsWith("_missing")) missing.push(r.reason.code);
    else throw r.reason;
  }
  if (missing.length > 0) {
    const names: Record<string, string> = {
      callout_missing: "the callout account",
      service_keys_missing: "the data-signer projection",
      issuer_missing: "the bearer issuer",
      owner_secret_missing: "the owner secret",
      idp_pin_missing: "the IdP pin (start once with --idp)",
    };
    throw new CotalError(
      "auth_material_missing",
      `Space ${JSON.stringify(cfg.space)} is missing ${
        missing.map((c) => `${names[c] ?? c} (${c})`).join(", ")
      }; provision user auth for the space (cotal up --user-auth --idp <url>).`,
    );
  }
  const [callout, serviceKeys, issuer, ownerSecret, pin] = results.map((r) =>
    (r as PromiseFulfilledResult<unknown>).value
  );
  return {
    callout: callout as Material["callout"],
    serviceKeys: serviceKeys as Material["serviceKeys"],
    issuer: issuer as Material["issuer"],
    ownerSecret: ownerSecret as Uint8Array,
    pin: pin as IdpPin,
  };
}

/** The stored pin, or (first start with `--idp`) the discovered IdP pinned now. */
async function resolvePin(state: SecretStore, cfg: Config): Promise<IdpPin> {
  let existing: IdpPin | undefined;
  try {
    existing = await loadIdpPin(state, cfg.space);
  } catch (err) {
    if (!isCotalError(err, "idp_pin_missing") || cfg.idp === undefined) throw err;
  }
  if (existing) {
    const moved = cfg.idp !== undefined && existing.issuer !== cfg.idp;
    if (moved || (cfg.audience !== undefined && existing.audience !== cfg.audience)) {
      throw new CotalError(
        "idp_pin_conflict",
        `Space ${JSON.stringify(cfg.space)} is pinned to IdP ${JSON.stringify(existing.issuer)} ` +
          `(audience ${JSON.stringify(existing.audience)}); re-pinning re-keys every owner, so ` +
          "remove the pin deliberately to migrate, or start without --idp/--audience.",
      );
    }
    return existing;
  }
  const found = await discoverIdp(cfg.idp!);
  return await ensureIdpPin(state, cfg.space, {
    issuer: found.issuer,
    audience: cfg.audience ?? found.issuer,
    jwksUrl: found.jwksUrl,
  });
}

async function connectCallout(cfg: Config, calloutCreds: string): Promise<NatsConnection> {
  try {
    return await connect({
      servers: cfg.servers,
      authenticator: credsAuthenticatorFast(calloutCreds),
      name: `cotal:auth-service:${cfg.space}`,
      // The responder must come back after a broker restart: keep reconnecting.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
    });
  } catch (err) {
    throw new CotalError(
      "broker_connect_failed",
      `The auth service could not connect to ${cfg.servers.join(", ")} with the callout creds ` +
        `(${err instanceof Error ? err.message.slice(0, 120) : String(err)}); check the broker ` +
        "is up and preloads this space's callout account.",
      { cause: err },
    );
  }
}

function listen(cfg: Config, handler: (req: Request) => Promise<Response>): HttpServer {
  try {
    return serveHttp({ hostname: cfg.hostname, port: cfg.port }, handler);
  } catch (err) {
    throw new CotalError(
      "auth_service_listen_failed",
      `The auth service could not listen on ${cfg.hostname}:${cfg.port} ` +
        `(${err instanceof Error ? err.message.slice(0, 120) : String(err)}); pick a free port.`,
      { cause: err },
    );
  }
}

function decisionEvent(d: CalloutDecision): AuthServiceEvent {
  return {
    event: "callout",
    outcome: d.outcome,
    code: d.code,
    principal: d.principal,
    server: d.serverId,
    exp: d.exp,
    ms: d.ms,
  };
}

function stopSignal(
  signal?: AbortSignal,
): { promise: Promise<void>; trigger(): void; dispose(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  const sigs = ["SIGTERM", "SIGINT"] as const;
  for (const s of sigs) Deno.addSignalListener(s, resolve);
  if (signal?.aborted) resolve();
  signal?.addEventListener("abort", () => resolve(), { once: true });
  return {
    promise,
    trigger: () => resolve(),
    dispose() {
      for (const s of sigs) Deno.removeSignalListener(s, resolve);
    },
  };
}

function randomHex(bytes: number): string {
  return [...crypto.getRandomValues(new Uint8Array(bytes))]
    .map((b) => b.toString(16).padStart(2, "0"))
    .join("");
}
