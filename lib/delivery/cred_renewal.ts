/**
 * A standing cred that renews itself from its source. At 75 % of the current JWT's life the
 * source is read again; a new cred for the same nkey is proven by a disposable probe
 * connection and only then swapped in (the resident connection reconnects onto it). An
 * unchanged cred past 75 % means the renewal owner missed its re-sign: that is a loud error on
 * every check, never a silent ride to expiry.
 *
 * @module
 */

import type { NatsConnection } from "nats";
import { connect, decodeJwt, parseCreds, type UserClaims } from "../nats/mod.ts";
import { CotalError, isCotalError } from "../errors.ts";
import { credsAuthenticatorFast, RENEW_FRACTION } from "../trust/mod.ts";
import { credFingerprint } from "../workspace/mod.ts";
import type { DeliveryLogger } from "./context.ts";

/** Delay between adopting a cred and moving the resident connection onto it. */
export const RESIDENT_SWAP_DEFER_MS = 250;

/** Where a cred is (re-)read from. `describe` names it (a key or a path), never its value. */
export interface CredReader {
  describe: string;
  read(): Promise<string | undefined>;
}

/** A parsed, signature-checked cred. */
export interface LoadedCred {
  text: string;
  jwt: string;
  claims: UserClaims;
  /** SHA-256 of the JWT: the generation token. */
  fingerprint: string;
  /** The user nkey (the JWT subject). */
  nkey: string;
  /** The `principal:` tag, when present. */
  principal?: string;
  /** The reply-inbox token the cred subscribes (`_INBOX_<connId>.>`). */
  connId: string;
  /** The data account it belongs to. */
  account: string;
}

/** Parses and checks a cred (refusing an expired one); errors never echo its bytes. */
export async function loadCred(text: string, what: string): Promise<LoadedCred> {
  let claims: UserClaims;
  let jwt: string;
  try {
    jwt = (await parseCreds(text)).jwt;
    claims = await decodeJwt(jwt, { type: "user" }) as UserClaims;
  } catch (err) {
    throw new CotalError(
      isCotalError(err, "jwt_expired") ? "cred_expired" : "cred_unreadable",
      `The ${what} is ${isCotalError(err, "jwt_expired") ? "expired" : "not a valid creds file"} (${
        isCotalError(err) ? err.code : "invalid"
      }); put a freshly minted one in place.`,
    );
  }
  const tags = claims.nats.tags ?? [];
  const principal = tags.find((t) => t.startsWith("principal:"))?.slice("principal:".length);
  const inbox = (claims.nats.sub?.allow ?? []).map((s) => /^_INBOX_(.+)\.>$/.exec(s)?.[1]).find(
    (x) => x,
  );
  return {
    text,
    jwt,
    claims,
    fingerprint: credFingerprint(jwt),
    nkey: claims.sub,
    ...(principal ? { principal } : {}),
    connId: inbox ?? claims.sub,
    account: claims.nats.issuer_account ?? claims.iss,
  };
}

/** Connects once with `creds` and closes: proof that the broker accepts it now. */
export async function probeCred(servers: string[], cred: LoadedCred): Promise<void> {
  let nc: NatsConnection | undefined;
  try {
    nc = await connect({
      servers,
      authenticator: credsAuthenticatorFast(cred.text),
      inboxPrefix: `_INBOX_${cred.connId}`,
      name: "cotal-delivery-probe",
      reconnect: false,
      timeout: 5000,
    });
    await nc.flush();
  } catch (err) {
    throw new CotalError(
      "cred_refused",
      `The broker did not accept the candidate cred (${(err as Error)?.message ?? err}).`,
    );
  } finally {
    await nc?.close().catch(() => {});
  }
}

/** What a renewal check did. */
export type RenewOutcome =
  | { kind: "adopted"; expiresAt?: number }
  | { kind: "unchanged" }
  | { kind: "missed" | "missing" | "refused"; error: string };

/** Options of {@linkcode RenewingCred}. */
export interface RenewingCredOptions {
  /** What the cred is, for messages (`delivery cred`). */
  what: string;
  servers: string[];
  log: DeliveryLogger;
}

/** A cred that follows its source. */
export class RenewingCred {
  readonly reader: CredReader;
  #current: LoadedCred;
  #opts: RenewingCredOptions;
  #nc?: NatsConnection;
  #timer?: ReturnType<typeof setTimeout>;
  #stopped = false;
  #checking?: Promise<RenewOutcome>;
  /** Number of generations adopted since start (0: still the first). */
  adoptions = 0;
  /** The last loud renewal failure, cleared by an adoption. */
  lastError?: string;

  constructor(reader: CredReader, initial: LoadedCred, opts: RenewingCredOptions) {
    this.reader = reader;
    this.#current = initial;
    this.#opts = opts;
  }

  /** The cred in use. */
  get current(): LoadedCred {
    return this.#current;
  }

  /** The authenticator: it presents whatever cred is current at each (re)connect. */
  authenticator() {
    return credsAuthenticatorFast(() => this.#current.text);
  }

  /** The connection to move onto each adopted cred; arms the 75 % timer. */
  attach(nc: NatsConnection): void {
    this.#nc = nc;
    this.#schedule();
  }

  #renewAt(): number | undefined {
    const { iat, exp } = this.#current.claims;
    if (exp === undefined) return undefined;
    return (iat + RENEW_FRACTION * (exp - iat)) * 1000;
  }

  #schedule(delayMs?: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    const at = this.#renewAt();
    if (at === undefined && delayMs === undefined) return;
    const wait = delayMs ?? Math.max(0, at! - Date.now());
    this.#timer = setTimeout(() => {
      this.check().catch(() => {});
    }, Math.min(wait, 2 ** 31 - 1));
  }

  #retryDelay(): number {
    const exp = this.#current.claims.exp;
    const left = exp === undefined ? 60_000 : exp * 1000 - Date.now();
    // Loud on every check, but not a busy loop: a quarter of what is left, 1-30 s.
    return Math.min(30_000, Math.max(1000, left / 4));
  }

  /** Re-reads the source now; concurrent callers share one check. */
  check(): Promise<RenewOutcome> {
    this.#checking ??= this.#check().finally(() => this.#checking = undefined);
    return this.#checking;
  }

  async #check(): Promise<RenewOutcome> {
    const { what, log, servers } = this.#opts;
    const loud = (kind: "missed" | "missing" | "refused", error: string): RenewOutcome => {
      this.lastError = error;
      log.error(error);
      this.#schedule(this.#retryDelay());
      return { kind, error };
    };
    let text: string | undefined;
    try {
      text = await this.reader.read();
    } catch (err) {
      return loud(
        "refused",
        `the ${what} source ${this.reader.describe} refused a read (${
          isCotalError(err) ? err.code : "error"
        }); restore access before the current JWT expires`,
      );
    }
    if (text === undefined) {
      return loud(
        "missing",
        `the ${what} is gone from ${this.reader.describe}; restore it before the current JWT expires`,
      );
    }
    const pastRenewPoint = (this.#renewAt() ?? Infinity) <= Date.now();
    let candidate: LoadedCred;
    try {
      candidate = await loadCred(text, what);
    } catch (err) {
      // The same (now expired) bytes: the re-sign never happened.
      if (text === this.#current.text) return loud("missed", this.#missed());
      return loud(
        "refused",
        `the ${what} at ${this.reader.describe} is not usable: ${(err as Error).message}`,
      );
    }
    if (candidate.fingerprint === this.#current.fingerprint) {
      if (pastRenewPoint) return loud("missed", this.#missed());
      this.#schedule();
      return { kind: "unchanged" };
    }
    if (candidate.nkey !== this.#current.nkey) {
      return loud(
        "refused",
        `the ${what} at ${this.reader.describe} is for another nkey; a re-sign must keep the ` +
          `identity this daemon started with`,
      );
    }
    try {
      await probeCred(servers, candidate);
    } catch (err) {
      return loud("refused", `the re-signed ${what} was not adopted: ${(err as Error).message}`);
    }
    this.#current = candidate;
    this.adoptions++;
    this.lastError = undefined;
    log.info(
      `adopted a re-signed ${what} (generation ${this.adoptions + 1}, expires ${
        candidate.claims.exp ? new Date(candidate.claims.exp * 1000).toISOString() : "never"
      })`,
    );
    // The resident connection re-authenticates with the proven cred, a moment later so the
    // reply of an explicit reload that triggered this is on the wire first.
    const nc = this.#nc;
    if (nc) {
      setTimeout(() => {
        if (!this.#stopped && !nc.isClosed()) nc.reconnect().catch(() => {});
      }, RESIDENT_SWAP_DEFER_MS);
    }
    this.#schedule();
    return {
      kind: "adopted",
      ...(candidate.claims.exp ? { expiresAt: candidate.claims.exp } : {}),
    };
  }

  #missed(): string {
    return `the ${this.#opts.what} at ${this.reader.describe} still holds the previous cred past ` +
      `75% of its life: the renewal owner has not re-signed it; run "cotal doctor auth --fix" or ` +
      `restart the manager before it expires`;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }
}
