/**
 * Proof of the caller on a request over the broker. A rail's subject names its caller and the
 * broker lets only that caller's creds publish there; but the broker never checks a reply
 * subject, so a member can aim a broker answer (a publish ack, an API reply) at a rail's
 * subjects. A subject alone therefore does not prove who sent a request. Each request carries
 * its caller's user JWT and an ed25519 signature, made with that JWT's key, over a context
 * string (one per rail), the subject, a timestamp and the body's hash; the server takes it only
 * when the JWT is signed by the space's account, is one of the profiles the rail admits, names
 * the subject's caller, and the signature verifies within a frozen window, and (for requests
 * with effects) once. The manager's control rail and the signer's rail both use it.
 *
 * @module
 */
import { headers as natsHeaders, type MsgHdrs } from "nats";
import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import {
  base64urlDecode,
  base64urlEncode,
  decodeJwt,
  parseCreds,
  publicKeyFromSeed,
  seedSigner,
  type Signer,
  verifySignature,
} from "../nats/mod.ts";
import type { UserClaims } from "../nats/mod.ts";
import type { MintAuth } from "./types.ts";

/** How far a request's timestamp may be from the server's clock (frozen: no request widens it). */
export const REQUEST_PROOF_WINDOW_MS = 60_000;
/**
 * The most nonces of one caller's requests with effects remembered at once. Each caller has its
 * own memory, so one caller filling it refuses only its own requests.
 */
export const REQUEST_REPLAY_CAP = 100_000;
/**
 * How long a nonce is remembered after its request arrived: twice the window, so every nonce is
 * kept until its timestamp is out of the window whatever the timestamp said, and the memory
 * is forgotten in arrival order.
 */
const REMEMBER_MS = 2 * REQUEST_PROOF_WINDOW_MS;

const H_JWT = "Cotal-Caller-Jwt";
/** The header that carries a request's caller JWT: a request without it carries no proof. */
export const PROOF_HEADER = H_JWT;
const H_TS = "Cotal-Ts";
const H_SIG = "Cotal-Sig";
const ENCODER = new TextEncoder();

async function signingInput(
  context: string,
  subject: string,
  ts: number,
  body: Uint8Array,
): Promise<Uint8Array> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", body as BufferSource));
  return ENCODER.encode(`${context}\n${subject}\n${ts}\n${base64urlEncode(hash)}`);
}

/** What a caller signs with: its JWT and its key. */
export interface RequestProver {
  readonly jwt: string;
  readonly signer: Signer;
}

/** The prover of the holder of `creds`. */
export async function requestProver(creds: string): Promise<RequestProver> {
  const { jwt, seed } = await parseCreds(creds);
  return { jwt, signer: await seedSigner(seed) };
}

/** The headers proving that `prover` sends `body` on `subject` now, on the rail `context`. */
export async function proveRequest(
  prover: RequestProver,
  context: string,
  subject: string,
  body: Uint8Array,
  now = Date.now(),
): Promise<MsgHdrs> {
  const sig = await prover.signer.sign(await signingInput(context, subject, now, body));
  const h = natsHeaders();
  h.set(H_JWT, prover.jwt);
  h.set(H_TS, String(now));
  h.set(H_SIG, base64urlEncode(sig));
  return h;
}

/** The keys a server trusts to sign its callers' JWTs. */
export interface RequestTrust {
  /** The space's account public key (`A…`). */
  readonly accountPub: string;
  /** Keys that may sign user JWTs of the account: the account key and its signing keys. */
  readonly issuers: readonly string[];
}

/** The keys of `auth`'s account: its own and its signing key. */
export async function requestTrustOf(auth: Pick<MintAuth, "account">): Promise<RequestTrust> {
  const { pub, signingSeed } = auth.account;
  const signingPub = (auth.account as { signingPub?: string }).signingPub ??
    await publicKeyFromSeed(signingSeed);
  return { accountPub: pub, issuers: [pub, signingPub] };
}

/** How one rail checks its requests. */
export interface RequestRail {
  /** The string every signature covers (one per rail and version). */
  readonly context: string;
  /** The credential profiles whose holders may call. */
  readonly profiles: readonly string[];
  /** The refusal's code, and its sentence's end (what to use instead). */
  readonly code: CotalErrorCode;
  readonly what: string;
  readonly hint: string;
}

/** Checks a rail's requests against a space's keys and remembers the nonces of requests. */
export class RequestVerifier {
  readonly #trust: RequestTrust;
  readonly #rail: RequestRail;
  readonly #now: () => number;
  /** caller → nonce → when it may be forgotten (arrival plus twice the window). */
  readonly #seen = new Map<string, Map<string, number>>();
  readonly #cap: number;

  constructor(
    trust: RequestTrust,
    rail: RequestRail,
    opts: { now?: () => number; replayCapPerCaller?: number } = {},
  ) {
    this.#trust = trust;
    this.#rail = rail;
    this.#now = opts.now ?? Date.now;
    this.#cap = opts.replayCapPerCaller ?? REQUEST_REPLAY_CAP;
  }

  #refuse(detail: string): never {
    throw new CotalError(
      this.#rail.code,
      `The ${this.#rail.what} was refused: ${detail}. ${this.#rail.hint}`,
    );
  }

  /**
   * The caller's verified claims when `headers` prove that a holder of an admitted profile of
   * this space named `caller` sent `body` on `subject` within the window; throws the rail's
   * code otherwise. With `once`, a nonce seen before is refused (a replay) and this one is
   * remembered ({@linkcode RequestVerifier.remember}); a rail that must count the caller's rate
   * first passes `once: false` and remembers after.
   */
  async verify(
    subject: string,
    body: Uint8Array,
    headers: MsgHdrs | undefined,
    caller: { owner: string; actor: string },
    nonce: string,
    once: boolean,
  ): Promise<UserClaims> {
    const jwt = headers?.get(H_JWT) ?? "";
    const tsText = headers?.get(H_TS) ?? "";
    const sig = base64urlDecode(headers?.get(H_SIG) ?? "");
    if (!jwt || !tsText || !sig) this.#refuse("it carries no caller proof");
    const ts = Number(tsText);
    const now = this.#now();
    if (!Number.isSafeInteger(ts) || Math.abs(now - ts) > REQUEST_PROOF_WINDOW_MS) {
      this.#refuse(
        `its timestamp is more than ${REQUEST_PROOF_WINDOW_MS / 1000} s from the server's clock`,
      );
    }
    let claims: UserClaims;
    try {
      claims = await decodeJwt(jwt, { type: "user", now: Math.floor(now / 1000) });
    } catch (err) {
      this.#refuse(`its caller JWT does not verify (${(err as Error).message})`);
    }
    const { accountPub, issuers } = this.#trust;
    if (!issuers.includes(claims.iss)) this.#refuse("its caller JWT is not signed by this space");
    if (claims.iss !== accountPub && claims.nats.issuer_account !== accountPub) {
      this.#refuse("its caller JWT names another account");
    }
    if (!this.#rail.profiles.includes(claims.name ?? "")) {
      this.#refuse(
        `its caller JWT is a ${JSON.stringify(claims.name)} credential, not ${
          this.#rail.profiles.join(" or ")
        }`,
      );
    }
    const tags = claims.nats.tags ?? [];
    if (!tags.includes(`owner:${caller.owner}`) || !tags.includes(`actor:${caller.actor}`)) {
      this.#refuse("its caller JWT names another caller than its subject");
    }
    const input = await signingInput(this.#rail.context, subject, ts, body);
    if (!await verifySignature(claims.sub, input, sig)) {
      this.#refuse("its signature does not verify");
    }
    if (once) this.remember(caller, nonce);
    return claims;
  }

  /**
   * Whether `caller` used `nonce` in a proven request inside the window: a copy of it is a
   * replay whether its proof verifies or not, so a rail may refuse it before spending a proof
   * check on it (one proven request re-sent at wire speed cost the signer a check per copy).
   */
  used(caller: { owner: string; actor: string }, nonce: string): boolean {
    return this.#seen.get(`${caller.owner}.${caller.actor}`)?.has(nonce) ?? false;
  }

  /**
   * Refuses a nonce `caller` used before inside the window (a replay), or one past the caller's
   * cap, and remembers it otherwise. Call it only for a proven request.
   */
  remember(caller: { owner: string; actor: string }, nonce: string): void {
    const now = this.#now();
    const key = `${caller.owner}.${caller.actor}`;
    for (const [k, m] of this.#seen) this.#forget(k, m, now);
    let seen = this.#seen.get(key);
    if (seen?.has(nonce)) this.#refuse("its nonce was used before (a replay)");
    if ((seen?.size ?? 0) >= this.#cap) {
      this.#refuse("this caller sent too many requests inside the window");
    }
    if (!seen) this.#seen.set(key, seen = new Map());
    seen.set(nonce, now + REMEMBER_MS);
  }

  #forget(key: string, seen: Map<string, number>, now: number): void {
    // Insertion order is arrival order, and so the order in which they may be forgotten.
    for (const [nonce, until] of seen) {
      if (until >= now) break;
      seen.delete(nonce);
    }
    if (seen.size === 0) this.#seen.delete(key);
  }
}
