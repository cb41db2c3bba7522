/**
 * `startAuthCallout`: the NATS auth-callout responder of one space (ADR-26, decentralized).
 *
 * A request that is not provably from a server (unsealed, unopenable, unsigned, `iss` not the
 * signing server, a re-sealed relay, or a server outside the allow-list) gets **no reply**:
 * answering would hand a forger a signed verdict. Everything after that is an authenticated
 * denial (a signed, sealed response carrying `error`) or an allow: a user JWT in the data
 * account, signed by its signing key, expiring with the bearer, granting the principal's
 * ledger ACL and its validated inbox nonce only.
 *
 * @module
 */

import { TokenBuckets } from "../rate.ts";
import { CotalError, isCotalError } from "../errors.ts";
import {
  type AuthorizationRequestClaims,
  decodeJwt,
  encodeJwt,
  type Signer,
  xkeyOpen,
  XKeyPair,
  xkeySeal,
} from "../nats/mod.ts";
import {
  assertConnId,
  assertExplicitPermissions,
  BEARER_CONNECT_RATE,
  calloutUserName,
  CONNECTION_LIMITS,
  permissionsFor,
  principalTags,
  syncSigner,
} from "../trust/mod.ts";
import { AUTH_CALLOUT_SUBJECT, type CalloutAuth } from "./callout_auth.ts";
import type { ServiceKeys } from "./callout_store.ts";
import type { KeyResolver } from "./jwks.ts";
import type { ActorRow } from "./ledger.ts";
import { type ValidatedBearer, validateUserToken } from "./validate.ts";

/** One callout request as the responder reads it (npm:nats's `Msg` is one). */
export interface CalloutMsg {
  /** The sealed (or plain) authorization request. */
  readonly data: Uint8Array;
  /** Its headers (the server's xkey). */
  readonly headers?: { get(name: string): string };
  /** Answers the request. */
  respond(data: Uint8Array): boolean;
}

/** What the responder needs of a broker connection (npm:nats's `NatsConnection` has it). */
export interface CalloutConnection {
  /** A queue subscription whose messages are read in turn. */
  subscribe(
    subject: string,
    opts: { queue: string },
  ): AsyncIterable<CalloutMsg> & { drain(): Promise<void>; unsubscribe(): void };
  /** Whether the connection is closed. */
  isClosed(): boolean;
}

/** The queue group every responder of a space joins, so replicas share the requests. */
export const CALLOUT_QUEUE = "cotal-auth-callout";
/** Requests handled at once; more wait in the subscription (the server times them out). */
export const CALLOUT_MAX_IN_FLIGHT = 64;

/**
 * Connects one principal is admitted (frozen): 64 at once (the delivery daemon's per-cred cap),
 * then 64 a minute. The cap kicks a principal's extra connections but commits no deny-new, and
 * a client that reconnects at once was back at once (red team 21): for a bearer the callout is
 * the deny-new, so kicked connections that come straight back are refused.
 */
export const CALLOUT_CONNECT_RATE: Readonly<{ perSecond: number; burst: number }> =
  BEARER_CONNECT_RATE;

/** What the responder concluded about one request (for audit logs; never holds a secret). */
export interface CalloutDecision {
  /** `drop`: no reply at all; `deny`: a signed refusal; `allow`: a minted user JWT. */
  outcome: "allow" | "deny" | "drop";
  /** A stable reason code (`callout_unsealed`, `bearer_expired`, `actor_not_granted`, ...). */
  code: string;
  /** One sentence for operators (never the bearer or any key). */
  message: string;
  /** The requesting server's id, once the request is proven. */
  serverId?: string;
  /** `<owner>.<actor>`, once the bearer is validated. */
  principal?: string;
  /** Unix seconds the minted user JWT expires at (allow only). */
  exp?: number;
  /** Milliseconds spent on the request. */
  ms: number;
}

/** Who is being let in: passed to `prepareConnection` before any authority is released. */
export interface CalloutGrant {
  /** The validated bearer the client presented. */
  bearer: ValidatedBearer;
  /** The actor's ledger row its grants come from. */
  row: ActorRow;
  /** The validated inbox nonce (`_INBOX_<nonce>.>` is the connection's reply space). */
  nonce: string;
}

/** Options for {@linkcode startAuthCallout}. */
export interface AuthCalloutOptions {
  /** A connection made with the callout account's `calloutCreds`. */
  nc: CalloutConnection;
  /** The space whose account the callout admits users into. */
  space: string;
  /** The callout record: its xkey and account signing key answer the broker. */
  callout: Pick<CalloutAuth, "account" | "xkey" | "dataAccount">;
  /** The data-account signer user JWTs are minted with. */
  serviceKeys: ServiceKeys;
  /** Bearer verification keys, usually `issuer.resolver()`. */
  resolver: KeyResolver;
  /** The connect gate: the bearer's grant must still be the current one. */
  ledger: { authorizeBearer(bearer: ValidatedBearer): Promise<ActorRow> };
  /** Server ids (`N…`) allowed to ask; unset means any server of this account's broker. */
  expectedServerIds?: readonly string[];
  /** Creates per-connection resources; a throw denies the connect. */
  prepareConnection?: (grant: CalloutGrant) => Promise<void>;
  /** Called once per request with the outcome. */
  onDecision?: (decision: CalloutDecision) => void;
  /**
   * The request subject, default `$SYS.REQ.USER.AUTH`. nats-server refuses every client
   * publish to that subject, so protocol tests play the server on another one.
   */
  subject?: string;
}

/** A running responder. */
export interface AuthCallout {
  /** Counts of outcomes so far. */
  stats(): { allow: number; deny: number; drop: number };
  /** Stop taking requests and wait for the ones in flight. */
  stop(): Promise<void>;
  /** Settles when the subscription ends (stop, or the connection closing). */
  readonly closed: Promise<void>;
}

class Drop extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

const TE = new TextEncoder();
const TD = new TextDecoder("utf-8", { fatal: true });

/**
 * Start the responder on `opts.nc` (queue group {@linkcode CALLOUT_QUEUE}). Refuses to start
 * without the xkey seed, the response signing seed or the data signer.
 *
 * @example
 * ```ts
 * const nc = await connect({
 *   servers,
 *   authenticator: credsAuthenticator(new TextEncoder().encode(callout.calloutCreds)),
 * });
 * const responder = await startAuthCallout({ nc, space, callout, serviceKeys,
 *   resolver: issuer.resolver(), ledger });
 * await nc.flush(); // only now is the first connect guaranteed an answer
 * ```
 */
export async function startAuthCallout(opts: AuthCalloutOptions): Promise<AuthCallout> {
  const { nc, space } = opts;
  if (typeof nc?.subscribe !== "function") badOptions("nc must be a NATS connection");
  if (typeof space !== "string" || space === "") badOptions("space is required");
  if (typeof opts.callout?.xkey?.seed !== "string" || opts.callout.xkey.seed === "") {
    throw new CotalError(
      "callout_missing_xkey",
      "The auth callout needs its xkey seed (requests are sealed to it); load the callout record.",
    );
  }
  if (opts.serviceKeys?.space !== space) badOptions("serviceKeys must be the space's signer");
  if (opts.callout.dataAccount !== opts.serviceKeys.dataAccount.pub) {
    badOptions("the callout's allowed account is not the signer's data account");
  }
  if (typeof opts.resolver !== "function") badOptions("resolver is required");
  if (typeof opts.ledger?.authorizeBearer !== "function") badOptions("ledger is required");
  const xkp = await XKeyPair.fromSeed(opts.callout.xkey.seed);
  if (xkp.publicKey !== opts.callout.xkey.pub) badOptions("the xkey seed does not match its key");
  const responseSigner = fastSigner(opts.callout.account.signingSeed);
  const userSigner = fastSigner(opts.serviceKeys.dataAccount.signingSeed);
  const expected = opts.expectedServerIds ? new Set(opts.expectedServerIds) : undefined;
  const ctx: Ctx = {
    space,
    xkp,
    responseSigner,
    userSigner,
    calloutAccount: opts.callout.account.pub,
    dataAccount: opts.serviceKeys.dataAccount.pub,
    expected,
    opts,
    connects: new TokenBuckets(CALLOUT_CONNECT_RATE),
  };
  const counts = { allow: 0, deny: 0, drop: 0 };
  const sub = nc.subscribe(opts.subject ?? AUTH_CALLOUT_SUBJECT, {
    queue: CALLOUT_QUEUE,
  });
  const inFlight = new Set<Promise<void>>();

  const loop = (async () => {
    for await (const msg of sub) {
      while (inFlight.size >= CALLOUT_MAX_IN_FLIGHT) await Promise.race(inFlight);
      const p = handle(ctx, msg).then((d) => {
        counts[d.outcome]++;
        try {
          opts.onDecision?.(d);
        } catch {
          // An audit hook's fault never stops the responder.
        }
      });
      inFlight.add(p);
      p.finally(() => inFlight.delete(p));
    }
    await Promise.allSettled([...inFlight]);
  })();

  let stopping: Promise<void> | undefined;
  return {
    stats: () => ({ ...counts }),
    stop() {
      stopping ??= (async () => {
        if (!nc.isClosed()) await sub.drain().catch(() => sub.unsubscribe());
        await loop;
      })();
      return stopping;
    },
    closed: loop,
  };
}

interface Ctx {
  space: string;
  xkp: XKeyPair;
  responseSigner: Signer;
  userSigner: Signer;
  calloutAccount: string;
  dataAccount: string;
  expected?: Set<string>;
  opts: AuthCalloutOptions;
  /** Admitted connects per principal and lifecycle ({@linkcode CALLOUT_CONNECT_RATE}). */
  connects: TokenBuckets;
}

async function handle(ctx: Ctx, msg: CalloutMsg): Promise<CalloutDecision> {
  const started = performance.now();
  const ms = () => Math.round((performance.now() - started) * 1000) / 1000;
  let req: AuthorizationRequestClaims;
  let serverXkey: string;
  try {
    ({ req, serverXkey } = await prove(ctx, msg));
  } catch (err) {
    const d = err instanceof Drop
      ? { code: err.code, message: err.message }
      : { code: "callout_internal", message: "The request could not be read." };
    return { outcome: "drop", ...d, ms: ms() };
  }
  const serverId = req.nats.server_id.id;
  let principal: string | undefined;
  try {
    const bearerText = req.nats.connect_opts?.auth_token ?? "";
    if (bearerText === "") {
      throw new CotalError(
        "callout_no_token",
        "No user token presented; connect with a Cotal bearer as the auth token.",
      );
    }
    const bearer = await validateUserToken(bearerText, {
      resolver: ctx.opts.resolver,
      space: ctx.space,
    });
    principal = `${bearer.owner}.${bearer.actor}`;
    // The validator allows clock skew; a user JWT already past its exp would be refused anyway.
    if (bearer.exp <= Math.floor(Date.now() / 1000)) {
      throw new CotalError("bearer_expired", "The bearer has expired; exchange for a fresh one.");
    }
    const row = await ctx.opts.ledger.authorizeBearer(bearer);
    // Per lifecycle: a despawned agent that spent its allowance must not lock out the next
    // agent of its name, which is the same principal under a new lifecycle (red team 49).
    if (!ctx.connects.take(`${principal}#${bearer.lifecycleUid ?? ""}`)) {
      throw new CotalError(
        "callout_connect_rate",
        `${principal} connected more than ${CALLOUT_CONNECT_RATE.burst} times in a minute; ` +
          "wait a minute and connect again, with fewer connections.",
      );
    }
    const nonce = req.nats.connect_opts?.name ?? "";
    try {
      assertConnId(nonce);
    } catch {
      throw new CotalError(
        "callout_bad_nonce",
        "The connection name is not a valid inbox nonce (8-120 characters of [A-Za-z0-9_-]); " +
          "connect with a random nonce as the name and _INBOX_<nonce> as the inbox prefix.",
      );
    }
    await ctx.opts.prepareConnection?.({ bearer, row, nonce });
    const jwt = await mintUser(ctx, req.nats.user_nkey, bearer, row, nonce);
    await respond(ctx, msg, req, serverXkey, { jwt, issuer_account: ctx.calloutAccount });
    return {
      outcome: "allow",
      code: "ok",
      message: "connect allowed",
      serverId,
      principal,
      exp: bearer.exp,
      ms: ms(),
    };
  } catch (err) {
    const code = isCotalError(err) ? err.code : "callout_internal";
    const message = isCotalError(err) ? err.message : "The callout failed to decide.";
    try {
      await respond(ctx, msg, req, serverXkey, {
        error: calloutReason(message),
        issuer_account: ctx.calloutAccount,
      });
    } catch {
      // Nothing more can be said; the server times the connect out.
    }
    return { outcome: "deny", code, message, serverId, principal, ms: ms() };
  }
}

/** Open, verify and attribute a request; every failure is a Drop (no reply). */
async function prove(
  ctx: Ctx,
  msg: CalloutMsg,
): Promise<{ req: AuthorizationRequestClaims; serverXkey: string }> {
  let serverXkey = "";
  try {
    serverXkey = msg.headers?.get("Nats-Server-Xkey") ?? "";
  } catch {
    // A header block nats.js cannot decode: unsealed, as far as this request goes.
  }
  if (serverXkey === "") {
    throw new Drop("callout_unsealed", "The request carries no Nats-Server-Xkey header.");
  }
  let token: string;
  try {
    token = TD.decode(await xkeyOpen(msg.data, ctx.xkp, serverXkey));
  } catch {
    throw new Drop("callout_unopenable", "The request does not open with the callout xkey.");
  }
  let req: AuthorizationRequestClaims;
  try {
    req = await decodeJwt(token, { type: "authorization_request" });
  } catch {
    throw new Drop("callout_bad_request", "The request is not a valid signed request JWT.");
  }
  const server = req.nats.server_id;
  if (req.iss !== server.id || !server.id.startsWith("N")) {
    throw new Drop("callout_forged", "The request is not signed by the server it names.");
  }
  if (ctx.expected && !ctx.expected.has(server.id)) {
    throw new Drop("callout_unknown_server", "The request comes from a server not allowed.");
  }
  if (server.xkey !== serverXkey) {
    throw new Drop("callout_resealed", "The request was sealed by a key its server did not sign.");
  }
  return { req, serverXkey };
}

async function mintUser(
  ctx: Ctx,
  userNkey: string,
  bearer: ValidatedBearer,
  row: ActorRow,
  nonce: string,
): Promise<string> {
  const principal = { owner: bearer.owner, actor: bearer.actor };
  const perms = permissionsFor(ctx.space, "agent", {
    connId: nonce,
    principal,
    // Equal to the row's (the connect gate checked); the row is the source of the ACL.
    lifecycleUid: row.lifecycleUid,
    allowSubscribe: row.allowSubscribe,
    allowPublish: row.allowPublish,
    ...(row.role !== undefined ? { role: row.role } : {}),
  });
  assertExplicitPermissions(perms, "callout user");
  const list = (l: { allow: string[]; deny: string[] }) =>
    l.deny.length > 0 ? { allow: l.allow, deny: l.deny } : { allow: l.allow };
  return await encodeJwt({
    sub: userNkey,
    name: calloutUserName(principal),
    // Broker access dies with the bearer: nats-server disconnects at the user JWT's exp.
    exp: bearer.exp,
    nats: {
      type: "user",
      issuer_account: ctx.dataAccount,
      pub: list(perms.pub),
      sub: list(perms.sub),
      tags: principalTags(principal),
      // The same per-connection caps as a minted agent's.
      ...CONNECTION_LIMITS.agent,
    },
  }, ctx.userSigner);
}

async function respond(
  ctx: Ctx,
  msg: CalloutMsg,
  req: AuthorizationRequestClaims,
  serverXkey: string,
  body: { jwt: string; issuer_account: string } | { error: string; issuer_account: string },
): Promise<void> {
  const jwt = await encodeJwt({
    sub: req.nats.user_nkey,
    aud: req.nats.server_id.id,
    nats: { type: "authorization_response", ...body },
  }, ctx.responseSigner);
  msg.respond(await xkeySeal(TE.encode(jwt), ctx.xkp, serverXkey));
}

const FOLD: Record<string, string> = {
  "\u2010": "-",
  "\u2011": "-",
  "\u2012": "-",
  "\u2013": "-",
  "\u2014": "-",
  "\u2015": "-",
  "\u2018": "'",
  "\u2019": "'",
  "\u201c": '"',
  "\u201d": '"',
  "\u2026": "...",
};

/**
 * A denial reason as printable ASCII of at most 256 characters. Dashes, smart quotes and the
 * ellipsis are folded, anything else becomes `?`: a reason the response path cannot carry
 * must still produce a refusal, never a connect that hangs until the server times it out.
 */
export function calloutReason(message: string): string {
  let out = "";
  for (const ch of String(message)) {
    const code = ch.codePointAt(0)!;
    out += code >= 0x20 && code < 0x7f ? ch : (FOLD[ch] ?? "?");
  }
  return out.length > 256 ? `${out.slice(0, 253)}...` : out;
}

/**
 * A Signer over native synchronous ed25519 (`node:crypto`, ~30 µs): a connect waits on two
 * signatures, and each WebCrypto call is a thread-pool round trip on the latency path.
 */
function fastSigner(seed: string): Signer {
  const s = syncSigner(seed);
  return { publicKey: s.publicKey, sign: (data) => Promise.resolve(s.sign(data)) };
}

function badOptions(detail: string): never {
  throw new CotalError("callout_bad_options", `The auth callout is misconfigured: ${detail}.`);
}
