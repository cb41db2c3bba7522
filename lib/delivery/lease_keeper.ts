/**
 * Keeping the delivery lease: a renew every `LEASE_RENEW_MS`, and a decision whenever a renew
 * fails, the row changes hands or the broker comes back. A failure is a question: the row is
 * re-read before anything is decided, and the daemon goes quiet only once it has been unable to
 * prove ownership long enough that a successor could be about to acquire.
 *
 * - held (ours): adopt it, and serve again if quiet;
 * - vacant (a row no holder wrote, e.g. a broker answer a member aimed at it): write ours back;
 * - unknown (cannot read): go quiet once the last good renew is older than the quiesce bound;
 * - gone: re-acquire and serve; taken by another holder: stop without releasing.
 *
 * @module
 */
import type { NatsConnection } from "nats";
import { LEASE_QUIESCE_AFTER_MS, LEASE_RENEW_MS } from "./constants.ts";
import type { DeliveryLogger } from "./context.ts";
import type { DeliveryLease } from "./lease.ts";

/** What the keeper arms, disarms and reports to. */
export interface LeaseKeeperHost {
  readonly ready: boolean;
  arm(): Promise<void>;
  disarm(): Promise<void>;
  /** True once the daemon is stopping: nothing more is decided. */
  stopping(): boolean;
  /** The lease was taken by another holder: the daemon must end, keeping that holder's row. */
  taken(reason: string): Promise<void>;
  log: DeliveryLogger;
}

/** Renews `lease` and decides what each doubt about it means for `host`. */
export class LeaseKeeper {
  readonly #lease: DeliveryLease;
  readonly #host: LeaseKeeperHost;
  #lastRenewSent = Date.now();
  #deciding = false;
  #timer?: ReturnType<typeof setInterval>;

  constructor(lease: DeliveryLease, host: LeaseKeeperHost) {
    this.#lease = lease;
    this.#host = host;
  }

  /** Settles one doubt about the lease (`why` is logged with what is done). */
  async decide(why: string): Promise<void> {
    const host = this.#host;
    const lease = this.#lease;
    if (this.#deciding || host.stopping()) return;
    this.#deciding = true;
    try {
      const view = await lease.read();
      if (view.state === "held") {
        lease.adopt(view);
        if (!host.ready && !host.stopping()) {
          await host.arm().catch(async (err) => {
            host.log.warn(`re-arming failed (${(err as Error)?.message ?? err}); staying quiet`);
            await host.disarm();
          });
          if (host.ready) host.log.info("lease proven again: serving");
        }
        return;
      }
      // No holder wrote that row (a broker answer a member aimed at it): ours again, at once.
      // (A lost race with another such write is settled by the next renew.)
      if (view.state === "vacant") {
        if (await lease.takeOver(view.revision).catch(() => false)) {
          host.log.warn(`the lease row was overwritten by no holder (${why}); wrote it back`);
          if (!host.ready && !host.stopping()) await host.arm().catch(() => host.disarm());
        }
        return;
      }
      if (view.state === "unknown") {
        if (host.ready && Date.now() - this.#lastRenewSent > LEASE_QUIESCE_AFTER_MS) {
          host.log.warn(`cannot prove the lease (${why}: ${view.error}); going quiet`);
          await host.disarm();
        }
        return;
      }
      await host.disarm();
      if (view.state === "gone" && await lease.acquire().catch(() => false)) {
        host.log.warn(`the lease row vanished (${why}); re-acquired it`);
        await host.arm().catch(() => host.disarm());
        return;
      }
      // Taken: exit without releasing, so the successor's row survives.
      await host.taken(`lost the delivery lease (${why}); another daemon serves the space`);
    } finally {
      this.#deciding = false;
    }
  }

  /** Renews every `LEASE_RENEW_MS` until `stop()`. */
  startRenewing(): void {
    this.#timer = setInterval(async () => {
      if (this.#host.stopping() || this.#deciding) return;
      const sent = Date.now();
      try {
        if (await this.#lease.write()) {
          this.#lastRenewSent = sent;
          // Quiet through an outage, and the row is still ours: serve again.
          if (!this.#host.ready) await this.decide("the lease renewed after a quiet spell");
          return;
        }
        await this.decide("renew refused");
      } catch (err) {
        await this.decide(`renew failed: ${(err as Error)?.message ?? err}`);
      }
    }, LEASE_RENEW_MS);
  }

  /**
   * Follows `nc`'s status: a broker that goes away is waited for, however long (the client
   * reconnects every 250 ms); once back, the lease is decided again.
   */
  followConnection(nc: NatsConnection): void {
    const log = this.#host.log;
    (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect") {
          log.warn("broker connection lost; reconnecting until it is back");
        } else if (s.type === "reconnect") {
          log.info("broker connection back");
          void this.decide("reconnected");
        } else if (s.type === "error") {
          log.warn(`connection error: ${String(s.data)}`);
        }
      }
    })().catch(() => {});
  }

  /** Stops renewing. */
  stop(): void {
    clearInterval(this.#timer);
  }
}
