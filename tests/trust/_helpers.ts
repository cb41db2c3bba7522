/**
 * Shared helpers for the trust tests: an operator-mode broker from our own serverConfig, a
 * creds connect, and permission checks observed from the broker's own -ERR replies.
 */
import { connect, type NatsConnection } from "nats";
import { readWithin, startTestBroker, type TestBroker } from "../_harness/broker.ts";
import {
  credsAuthenticatorFast,
  serverConfig,
  type SpaceAccountAuth,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import { parseCreds } from "../../lib/nats/mod.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";

/** Starts a broker trusting `broker` and preloading `spaces`. */
export function startAuthBroker(
  broker: Pick<SpaceAuth, "operator" | "sys">,
  spaces: Array<SpaceAuth | SpaceAccountAuth>,
): Promise<TestBroker> {
  return startTestBroker({
    config: ({ port, storeDir }) => serverConfig(broker, spaces, { port, storeDir }),
  });
}

/** The user public key (`sub`) of a creds file. */
export function credsId(creds: string): string {
  const jwt = /BEGIN NATS USER JWT-+\n(\S+)\n/.exec(creds)![1];
  return decodeJwtUnverified(jwt).sub;
}

/** Connects with creds and the per-connection inbox prefix the grants expect. */
export function connectCreds(
  url: string,
  creds: string,
  opts: { inboxPrefix?: string } = {},
): Promise<NatsConnection> {
  return connect({
    servers: url,
    authenticator: credsAuthenticatorFast(creds),
    inboxPrefix: opts.inboxPrefix ?? `_INBOX_${credsId(creds)}`,
    reconnect: false,
  });
}

/**
 * Presents `creds` on a raw protocol connection (INFO, CONNECT, PING) and returns the broker's
 * verdict line: `PONG` when it accepted the connect, its `-ERR '…'` otherwise. Raw because
 * npm:nats's Node transport can surface the refused socket's ECONNRESET as an uncaught error
 * under Deno, which would abort the test module.
 */
export async function rawConnect(url: string, creds: string): Promise<string> {
  const { hostname, port } = new URL(url.replace(/^nats:/, "http:"));
  const conn = await Deno.connect({ hostname, port: Number(port) });
  const reader = conn.readable.getReader();
  const dec = new TextDecoder();
  let buf = "";
  const line = async () => {
    while (!buf.includes("\r\n")) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await readWithin(reader, 10_000, "the broker's next line");
      } catch (err) {
        if (/timed out/.test((err as Error).message)) throw err;
        return `RESET ${(err as Error).name}`;
      }
      const { value, done } = chunk;
      if (done) return buf || "EOF";
      buf += dec.decode(value);
    }
    const i = buf.indexOf("\r\n");
    const l = buf.slice(0, i);
    buf = buf.slice(i + 2);
    return l;
  };
  try {
    const info = JSON.parse((await line()).replace(/^INFO /, ""));
    const auth = credsAuthenticatorFast(creds)(info.nonce);
    const connect = {
      verbose: false,
      pedantic: false,
      protocol: 1,
      lang: "raw",
      version: "0",
      ...auth,
    };
    const writer = conn.writable.getWriter();
    await writer.write(new TextEncoder().encode(`CONNECT ${JSON.stringify(connect)}\r\nPING\r\n`));
    for (;;) {
      const l = await line();
      if (l !== "+OK" && !l.startsWith("INFO ")) return l;
    }
  } finally {
    try {
      conn.close();
    } catch {
      // Already closed by the broker.
    }
  }
}

/** Connect must fail; returns the error line the broker sent. */
export async function connectRefused(url: string, creds: string): Promise<string> {
  const verdict = await rawConnect(url, creds);
  if (verdict === "PONG") {
    throw new Error("the broker accepted a connect that should have been refused");
  }
  return verdict;
}

/** Connect must succeed (the broker answers the PING). */
export async function connectAccepted(url: string, creds: string): Promise<void> {
  const verdict = await rawConnect(url, creds);
  if (verdict !== "PONG") throw new Error(`the broker refused the connect: ${verdict}`);
}

type Violation = { operation: string; subject: string };

/** Records the permission violations the broker reports on `nc`. */
export function watchViolations(nc: NatsConnection): Violation[] {
  const seen: Violation[] = [];
  (async () => {
    for await (const s of nc.status()) {
      const ctx = (s as { permissionContext?: Violation }).permissionContext;
      if (s.type === "error" && ctx) seen.push({ operation: ctx.operation, subject: ctx.subject });
    }
  })();
  return seen;
}

async function settle(nc: NatsConnection, seen: Violation[], op: string, subject: string) {
  // A PING round trip orders after the server's -ERR for anything sent before it.
  for (let i = 0; i < 3; i++) {
    await nc.flush();
    if (seen.some((v) => v.operation === op && v.subject === subject)) return true;
  }
  await new Promise((r) => setTimeout(r, 50));
  await nc.flush();
  return seen.some((v) => v.operation === op && v.subject === subject);
}

/** True when the broker reports a publish violation for `subject` (the publish is refused). */
export async function publishDenied(
  nc: NatsConnection,
  seen: Violation[],
  subject: string,
): Promise<boolean> {
  nc.publish(subject, "x");
  return await settle(nc, seen, "publish", subject);
}

/** True when the broker reports a subscription violation for `subject`. */
export async function subscribeDenied(
  nc: NatsConnection,
  seen: Violation[],
  subject: string,
): Promise<boolean> {
  const sub = nc.subscribe(subject, { callback: () => {} });
  const denied = await settle(nc, seen, "subscription", subject);
  if (!denied) sub.unsubscribe();
  return denied;
}

/** Publishes on `pub` and resolves true once `sub` (already subscribed to `pattern`) gets it. */
export async function delivered(
  pub: NatsConnection,
  sub: NatsConnection,
  pattern: string,
  subject: string,
): Promise<boolean> {
  const s = sub.subscribe(pattern, { max: 1 });
  await sub.flush();
  pub.publish(subject, "hello");
  await pub.flush();
  const timer = setTimeout(() => s.unsubscribe(), 2000);
  for await (const m of s) {
    clearTimeout(timer);
    return m.subject === subject;
  }
  clearTimeout(timer);
  return false;
}

/** Reads a creds file's decoded user claims. */
export async function credsClaims(creds: string) {
  const { jwt } = await parseCreds(creds);
  return decodeJwtUnverified(jwt);
}

/** True when a request to `subject` is refused by the broker as a permission violation. */
export async function requestDenied(
  nc: NatsConnection,
  subject: string,
  data = "",
): Promise<boolean> {
  try {
    await nc.request(subject, data, { timeout: 2000 });
    return false;
  } catch (err) {
    return (err as { code?: string }).code === "PERMISSIONS_VIOLATION";
  }
}

/** Requests `subject` and returns the decoded reply (the broker let it through). */
export async function requestJson(
  nc: NatsConnection,
  subject: string,
  data: unknown = "",
): Promise<Record<string, unknown>> {
  const body = typeof data === "string" ? data : JSON.stringify(data);
  const m = await nc.request(subject, body, { timeout: 2000 });
  return m.json<Record<string, unknown>>();
}

/** True when `p` rejects with a broker permission violation. */
export async function deniedBy(p: Promise<unknown>): Promise<boolean> {
  try {
    await p;
    return false;
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return e.code === "PERMISSIONS_VIOLATION" || /permissions violation/i.test(e.message ?? "");
  }
}
