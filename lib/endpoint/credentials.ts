/**
 * The endpoint's credential holder: the creds or bearer it presents, when to renew it, and
 * the authenticator npm:nats calls at every (re)connect.
 *
 * An expired credential is never presented: the broker would refuse it anyway (a bearer costs
 * a full auth-callout round trip to refuse), so the authenticator throws instead, npm:nats
 * closes the connection, and the endpoint's own rebuild loop takes over with its backoff.
 *
 * @module
 */

import type { Authenticator } from "nats";
import { decodeJwt as decodeBearerClaims } from "jose";
import { CotalError } from "../errors.ts";
import { decodeJwtUnverified, isRelayedCreds, parseCreds, parseRelayedCreds } from "../nats/mod.ts";
import { credsAuthenticatorFast, principalFromTags, RENEW_FRACTION } from "../trust/mod.ts";
import { assertValidPrincipal, type Principal } from "../wire/mod.ts";
import type { CredentialSource } from "./types.ts";

/** A credential with less life left than this is treated as dead (connect and kick race). */
export const EXPIRY_MARGIN_MS = 2_000;
/** Creds are renewed at this fraction of their life (the trust layer's one renewal line). */
export const CREDS_RENEW_FRACTION: number = RENEW_FRACTION;
/** A bearer is refreshed this long before it expires. */
export const BEARER_REFRESH_MARGIN_MS = 60_000;
/** A failed creds renewal is retried after this long (never later than just before expiry). */
export const CREDS_RETRY_MS = 60_000;
/** A failed bearer refresh is retried after this long. */
export const BEARER_RETRY_MS = 15_000;
/** No creds renewal is scheduled sooner than this. */
export const MIN_RENEW_DELAY_MS = 1_000;
/**
 * No bearer refresh is scheduled sooner than this (a bearer shorter than the margin), unless
 * the bearer dies sooner than twice this: then halfway through its remaining life.
 */
export const MIN_BEARER_REFRESH_DELAY_MS = 5_000;

/** One parsed credential. Times are epoch ms; `expiresAt` is undefined for an unbounded JWT. */
export interface HeldCredential {
  text: string;
  /** The user public key (creds) or `undefined` (bearer). */
  nkey?: string;
  issuedAt?: number;
  expiresAt?: number;
  /** The principal the credential itself names (creds tags, bearer `act`), when it names one. */
  principal?: Principal;
  /** The reply-inbox token the creds grant (`_INBOX_<connId>.>`). */
  connId?: string;
}

/** Parse and check a creds file's text (never echoing it). */
export async function parseHeldCreds(text: string): Promise<HeldCredential> {
  if (typeof text !== "string") {
    throw new CotalError(
      "creds_bad_format",
      "The creds source returned something other than text; return the .creds file content.",
    );
  }
  // Relayed creds (a sandboxed agent's) carry the JWT alone: its relay proves the key.
  const { jwt } = isRelayedCreds(text) ? parseRelayedCreds(text) : await parseCreds(text);
  const claims = decodeJwtUnverified(jwt);
  const allow = (claims.nats as { sub?: { allow?: string[] } }).sub?.allow ?? [];
  const inbox = allow.map((s) => /^_INBOX_([A-Za-z0-9_-]+)\.>$/.exec(s)?.[1]).find(Boolean);
  return {
    text,
    nkey: claims.sub,
    issuedAt: claims.iat * 1000,
    expiresAt: claims.exp === undefined ? undefined : claims.exp * 1000,
    principal: principalFromTags(claims.nats.tags),
    connId: inbox ?? claims.sub,
  };
}

/** Parse a bearer's unverified claims: only its expiry and named principal matter here. */
export function parseHeldBearer(text: string): HeldCredential {
  let claims: Record<string, unknown>;
  try {
    claims = decodeBearerClaims(text) as Record<string, unknown>;
  } catch {
    throw new CotalError(
      "bearer_bad_format",
      "The bearer is not a compact JWT; pass the token the exchange endpoint returned.",
    );
  }
  const exp = typeof claims.exp === "number" ? claims.exp * 1000 : undefined;
  const iat = typeof claims.iat === "number" ? claims.iat * 1000 : undefined;
  const act = (typeof claims.act === "object" && claims.act !== null ? claims.act : {}) as Record<
    string,
    unknown
  >;
  const owner = typeof act.owner === "string" ? act.owner : claims.sub;
  const actor = act.actor;
  return {
    text,
    issuedAt: iat,
    expiresAt: exp,
    principal: typeof owner === "string" && typeof actor === "string"
      ? { owner, actor }
      : undefined,
  };
}

/** True when `cred` cannot be presented at `now` (expired or inside the margin). */
export function isDead(cred: HeldCredential, now = Date.now()): boolean {
  return cred.expiresAt !== undefined && cred.expiresAt - now < EXPIRY_MARGIN_MS;
}

function when(ms: number): string {
  return new Date(ms).toISOString();
}

/** The code of a dead credential, by kind. */
const EXPIRED = {
  creds: "creds_expired",
  bearer: "bearer_expired",
  none: "none_expired",
} as const;

/** What is presented, and how it is renewed. */
export class CredentialHolder {
  readonly kind: "creds" | "bearer" | "none";
  #source?: CredentialSource;
  #current?: HeldCredential;
  #sentinel?: HeldCredential;
  #sentinelAuth?: Authenticator;
  #credsAuth?: Authenticator;
  #initial?: string;
  #sentinelText?: string;

  constructor(opts: {
    creds?: string | CredentialSource;
    bearer?: string | CredentialSource;
    sentinelCreds?: string;
  }) {
    if (opts.creds !== undefined && opts.bearer !== undefined) {
      throw new CotalError(
        "conflicting_credentials",
        "The endpoint was given both creds and a bearer; pass creds for static mode or a bearer with sentinelCreds for user mode.",
      );
    }
    if (opts.bearer !== undefined && opts.sentinelCreds === undefined) {
      throw new CotalError(
        "missing_sentinel_creds",
        "A bearer is presented with the callout account's sentinel creds; pass sentinelCreds.",
      );
    }
    const given = opts.creds ?? opts.bearer;
    this.kind = opts.creds !== undefined ? "creds" : opts.bearer !== undefined ? "bearer" : "none";
    if (typeof given === "function") this.#source = given;
    else if (given !== undefined && typeof given !== "string") {
      throw new CotalError(
        "invalid_credential",
        `The ${this.kind} option must be a string or an async function returning one.`,
      );
    }
    this.#initial = typeof given === "string" ? given : undefined;
    this.#sentinelText = opts.sentinelCreds;
  }

  /** True when the credential can be renewed (a function source). */
  get renewable(): boolean {
    return this.#source !== undefined;
  }

  /** The credential presented now. */
  get current(): HeldCredential | undefined {
    return this.#current;
  }

  /** Load the first credential (calling the source); refuses one that is already dead. */
  async load(): Promise<HeldCredential | undefined> {
    if (this.kind === "none") return undefined;
    if (this.#sentinelText !== undefined && !this.#sentinel) {
      this.#sentinel = await parseHeldCreds(this.#sentinelText);
      this.#sentinelAuth = credsAuthenticatorFast(this.#sentinelText);
    }
    const cred = this.#source ? await this.fetch() : await this.#parse(this.#initial!);
    if (isDead(cred)) throw this.deadError(cred);
    this.#adopt(cred);
    return cred;
  }

  /** Ask the source for a fresh credential (not adopted yet). */
  async fetch(): Promise<HeldCredential> {
    if (!this.#source) throw this.deadError(this.#current!);
    let text: string;
    try {
      text = await this.#source();
    } catch (err) {
      throw new CotalError(
        "credential_source_failed",
        `The ${this.kind} renewal function failed (${
          errorText(err)
        }); check the credential issuer is reachable.`,
        { cause: err },
      );
    }
    const cred = await this.#parse(text);
    if (this.#current?.nkey !== undefined && cred.nkey !== this.#current.nkey) {
      throw new CotalError(
        "creds_identity_changed",
        "The renewed creds carry a different nkey than the live connection; re-mint them for the same identity.",
      );
    }
    return cred;
  }

  /** Make `cred` the one every later (re)connect presents. */
  adopt(cred: HeldCredential): void {
    if (isDead(cred)) throw this.deadError(cred);
    this.#adopt(cred);
  }

  #adopt(cred: HeldCredential): void {
    this.#current = cred;
    if (this.kind === "creds") this.#credsAuth = credsAuthenticatorFast(cred.text);
  }

  #parse(text: string): Promise<HeldCredential> | HeldCredential {
    return this.kind === "creds" ? parseHeldCreds(text) : parseHeldBearer(text);
  }

  /** The refusal for presenting a dead credential, naming which case this is. */
  deadError(cred: HeldCredential): CotalError {
    const at = cred.expiresAt === undefined ? "" : ` at ${when(cred.expiresAt)}`;
    const code = EXPIRED[this.kind];
    if (this.#source) {
      return new CotalError(
        code,
        `The ${this.kind} expired${at} and its renewal function has not produced a live one; the endpoint keeps retrying.`,
      );
    }
    return new CotalError(
      code,
      `The string ${this.kind} expired${at} and cannot be renewed, so it is not presented; pass a renewal function (or rebuild the endpoint with a fresh one).`,
    );
  }

  /**
   * When to renew next (epoch ms), or undefined when the credential never expires or cannot
   * be renewed. Creds renew at 75% of their life, bearers 60 s before expiry.
   */
  renewAt(now = Date.now()): number | undefined {
    const c = this.#current;
    if (!this.#source || c?.expiresAt === undefined) return undefined;
    if (this.kind === "creds") {
      const from = c.issuedAt ?? now;
      const at = from + (c.expiresAt - from) * CREDS_RENEW_FRACTION;
      return Math.max(at, now + MIN_RENEW_DELAY_MS);
    }
    // A bearer living less than the margin would otherwise be refreshed in a tight loop; one
    // living less than twice the floor is refreshed halfway, still ahead of its expiry.
    const floor = Math.min(MIN_BEARER_REFRESH_DELAY_MS, (c.expiresAt - now) / 2);
    return Math.max(c.expiresAt - BEARER_REFRESH_MARGIN_MS, now + floor);
  }

  /** When to retry a failed renewal: the retry period, but before the current one dies. */
  retryAt(now = Date.now()): number {
    const c = this.#current;
    const period = this.kind === "bearer" ? BEARER_RETRY_MS : CREDS_RETRY_MS;
    let at = now + period;
    if (c?.expiresAt !== undefined) at = Math.min(at, c.expiresAt - EXPIRY_MARGIN_MS - 500);
    return Math.max(at, now + MIN_RENEW_DELAY_MS);
  }

  /**
   * The npm:nats authenticator. It reads the held credential at each (re)connect and throws
   * rather than present a dead one (npm:nats then closes, and the endpoint rebuilds).
   */
  authenticator(): Authenticator | undefined {
    if (this.kind === "none") return undefined;
    return (nonce?: string) => {
      const c = this.#current;
      if (!c) throw new CotalError("credential_missing", "No credential is loaded yet.");
      if (isDead(c)) throw this.deadError(c);
      return this.#present(c, nonce);
    };
  }

  /** An authenticator presenting exactly `cred` (a renewal's preflight connection). */
  authenticatorFor(cred: HeldCredential): Authenticator | undefined {
    if (this.kind === "none") return undefined;
    const creds = this.kind === "creds" ? credsAuthenticatorFast(cred.text) : undefined;
    return (nonce?: string) => creds ? creds(nonce) : this.#present(cred, nonce);
  }

  #present(c: HeldCredential, nonce?: string) {
    if (this.kind === "creds") return this.#credsAuth!(nonce);
    return { ...this.#sentinelAuth!(nonce), auth_token: c.text };
  }
}

/** Checks the principal a credential names against the card's explicit one. */
export function resolvePrincipal(
  kind: "creds" | "bearer" | "none",
  cred: HeldCredential | undefined,
  card: { owner?: string; actor?: string },
): Principal {
  const explicit = card.owner !== undefined || card.actor !== undefined;
  if (explicit && (card.owner === undefined || card.actor === undefined)) {
    throw new CotalError(
      "incomplete_principal",
      "The card names only one of owner and actor; set both or neither.",
    );
  }
  const named = cred?.principal ??
    (kind === "creds" && cred?.nkey ? { owner: "local", actor: cred.nkey } : undefined);
  if (named && explicit && (named.owner !== card.owner || named.actor !== card.actor)) {
    throw new CotalError(
      "principal_mismatch",
      `The card says ${card.owner}.${card.actor} but the credential speaks for ${named.owner}.${named.actor}; fix the card or use that agent's credential.`,
    );
  }
  const p = named ?? (explicit ? { owner: card.owner!, actor: card.actor! } : undefined);
  if (!p) {
    throw new CotalError(
      "missing_principal",
      "Without a credential naming its principal, the card must set owner and actor.",
    );
  }
  return assertValidPrincipal(p);
}

/**
 * Load the first credential and settle who the endpoint is: its principal (the credential's,
 * checked against the card's) and its reply-inbox token (the creds' grant, when it names one).
 */
export async function loadIdentity(
  holder: CredentialHolder,
  opts: { bearer?: unknown; card: { owner?: string; actor?: string } },
): Promise<{ principal: Principal; connId?: string }> {
  if (
    typeof opts.bearer === "function" &&
    (opts.card.owner === undefined || opts.card.actor === undefined)
  ) {
    // A renewal source may hand back any principal's bearer: pin the one expected.
    throw new CotalError(
      "missing_principal",
      "A bearer function needs an explicit card.owner and card.actor to pin who it renews for.",
    );
  }
  const cred = await holder.load();
  return { principal: resolvePrincipal(holder.kind, cred, opts.card), connId: cred?.connId };
}

/** A short, secret-free description of an error. */
export function errorText(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  return msg.length > 200 ? `${msg.slice(0, 197)}...` : msg;
}
