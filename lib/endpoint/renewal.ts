/**
 * Credential renewal for a live endpoint: creds at 75% of their life, bearers 60 s before
 * expiry. A renewed credential is proven on a throwaway connection first (a refused one never
 * replaces a working one), then swapped onto the live connection with a controlled reconnect:
 * the broker checks a JWT only at connect, and drops a client whose JWT expires.
 *
 * @module
 */

import type { NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import { type CredentialHolder, errorText, type HeldCredential, isDead } from "./credentials.ts";
import { dial } from "./dial.ts";
import { RenewalEvent } from "./events.ts";

/** How long a swap waits for the library to report the reconnect. */
const SWAP_WAIT_MS = 10_000;

/** What renewal needs from its endpoint. */
export interface RenewalHost {
  creds: CredentialHolder;
  servers: string[];
  connId(): string;
  /** The live connection, when the endpoint is running. */
  live(): NatsConnection | undefined;
  /** Resolves at the next library reconnect (or after `ms`). */
  transportUp(ms: number): Promise<void>;
  warn(err: CotalError, retryInMs?: number): void;
  /** Told of each credential adopted, as the endpoint's `renewed` event. */
  renewed(ev: RenewalEvent): void;
}

/** Schedules and performs renewals; one at a time. */
export class Renewal {
  readonly #host: RenewalHost;
  #timer?: ReturnType<typeof setTimeout>;

  constructor(host: RenewalHost) {
    this.#host = host;
  }

  /** Arm the timer for the held credential's next renewal (no-op when it cannot renew). */
  schedule(): void {
    this.cancel();
    const at = this.#host.creds.renewAt();
    if (at !== undefined) this.#arm(at);
  }

  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Before a (re)dial: replace a dead credential from its source, or refuse naming the case. */
  async freshen(): Promise<void> {
    const creds = this.#host.creds;
    const c = creds.current;
    if (!c || !isDead(c)) return;
    if (!creds.renewable) throw creds.deadError(c);
    const next = await creds.fetch();
    creds.adopt(next);
    this.#host.renewed(renewalEvent(creds, next));
  }

  #arm(at: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#renew(), Math.max(0, at - Date.now()));
  }

  async #renew(): Promise<void> {
    const h = this.#host;
    // While rebuilding, the rebuild itself fetches a fresh credential and re-arms the timer.
    if (!h.live()) return;
    try {
      const next = await h.creds.fetch();
      const cur = h.creds.current;
      if (next.expiresAt !== undefined && (cur?.expiresAt ?? Infinity) >= next.expiresAt) {
        throw new CotalError(
          "renewal_not_newer",
          `The ${h.creds.kind} renewal function returned a credential that expires no later than the live one.`,
        );
      }
      await this.#preflight(next);
      h.creds.adopt(next);
      const nc = h.live();
      if (nc) {
        const up = h.transportUp(SWAP_WAIT_MS);
        await nc.reconnect();
        await up;
      }
      h.renewed(renewalEvent(h.creds, next));
      if (h.live()) this.schedule();
    } catch (err) {
      const at = h.creds.retryAt();
      h.warn(
        err instanceof CotalError
          ? err
          : new CotalError("renewal_failed", `Credential renewal failed (${errorText(err)}).`),
        at - Date.now(),
      );
      this.#arm(at);
    }
  }

  async #preflight(cred: HeldCredential): Promise<void> {
    const h = this.#host;
    let nc: NatsConnection;
    try {
      nc = await dial({
        servers: h.servers,
        authenticator: h.creds.authenticatorFor(cred),
        connId: h.connId(),
        name: h.creds.kind === "bearer" ? h.connId() : "cotal-preflight",
        live: false,
      });
    } catch (err) {
      throw new CotalError(
        "renewal_refused",
        `The broker refused the renewed ${h.creds.kind} on a test connection (${
          errorText(err)
        }); the live connection keeps the current one.`,
        { cause: err },
      );
    }
    await nc.close().catch(() => {});
  }
}

function renewalEvent(creds: CredentialHolder, cred: HeldCredential): RenewalEvent {
  return new RenewalEvent(creds.kind === "bearer" ? "bearer" : "creds", cred.expiresAt ?? Infinity);
}
