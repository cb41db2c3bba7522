/**
 * The manager's own credential upkeep, on its timers: its supervisor cred renewed at
 * {@linkcode RENEW_FRACTION} of its life (then a reconnect onto it), and, when it signs locally,
 * the space's daemon creds re-signed at half the life they have left, at least every
 * {@linkcode DAEMON_REMINT_INTERVAL_MS}.
 *
 * @module
 */
import { CREDENTIAL_LIFETIMES, RENEW_FRACTION } from "../trust/mod.ts";
import { errorText } from "../wire/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { remintAndLog } from "./daemon_remint.ts";
import { nextResignDelayMs, RESIGN_RETRY_MS } from "../workspace/mod.ts";
import { probeCreds } from "./manager_broker.ts";
import { DAEMON_REMINT_INTERVAL_MS } from "./manager_types.ts";

/** What the upkeep needs from its manager. */
export interface UpkeepHost {
  /** Runs `fn` after `ms` on a timer the manager clears when it stops. */
  later(ms: number, fn: () => void): void;
  /** Lets the manager's stop wait for `p`. */
  track<T>(p: Promise<T>): Promise<T>;
  log(line: string): void;
  /** Whether the manager still runs (the next renewal is scheduled only then). */
  running(): boolean;
}

/** Renews the manager's own cred with `renew` at the fraction of its life, while it runs. */
export function scheduleSelfRenewal(host: UpkeepHost, renew: () => Promise<void>): void {
  const ttl = CREDENTIAL_LIFETIMES.supervisor.defaultTtlSeconds * 1000;
  host.later(ttl * RENEW_FRACTION, async () => {
    try {
      await renew();
      host.log("manager: supervisor cred renewed");
    } catch (err) {
      host.log(`manager: supervisor cred renewal failed (${errorText(err)})`);
    }
    if (host.running()) scheduleSelfRenewal(host, renew);
  });
}

/**
 * Re-signs the space's daemon creds now and again before they need it (half the life the
 * shortest has left, at least every {@linkcode DAEMON_REMINT_INTERVAL_MS}), each proven against
 * the broker.
 */
export function scheduleDaemonRemint(
  host: UpkeepHost,
  opts: { root: string; space: string; store: SecretStore; servers: string[] },
): void {
  const tick = () => {
    host.track(
      remintAndLog(
        opts.root,
        opts.space,
        opts.store,
        (c) => probeCreds(opts.servers, c),
        (l) => host.log(l),
      ).catch((err) => {
        host.log(`manager: daemon re-sign failed (${errorText(err)})`);
        return undefined;
      }).then((results) => {
        if (!host.running()) return;
        host.later(
          results
            ? nextResignDelayMs(results, { maxMs: DAEMON_REMINT_INTERVAL_MS })
            : RESIGN_RETRY_MS,
          tick,
        );
      }),
    );
  };
  tick();
}
