/**
 * The supervisor's line to the broker: its connection (re-read creds at every reconnect, wait
 * for a broker that is not up when asked), the log of its outages, and the preflight that
 * proves a credential before it is stored.
 *
 * @module
 */
import type { NatsConnection } from "nats";
import { CotalEndpoint } from "../endpoint/mod.ts";
import { limitLog } from "../log_limit.ts";
import type { Principal } from "../wire/mod.ts";
import { connect, connectWhenUp } from "../nats/mod.ts";
import { CotalError } from "../errors.ts";
import { credsAuthenticatorFast } from "../trust/mod.ts";
import { errorText } from "../wire/mod.ts";

/** What the supervisor dials with. */
export interface SupervisorDial {
  readonly servers: string[];
  /** The current creds text (a renewal swaps it and reconnects). */
  readonly creds: () => string;
  /** Its identity's public key: the inbox prefix its grants allow. */
  readonly connId: string;
  readonly space: string;
  /** Wait for a broker that is not up yet (cotal-supervise) instead of failing fast. */
  readonly waitForBroker?: boolean;
  readonly log: (line: string) => void;
  readonly signal: AbortSignal;
}

/** Connects the supervisor; refuses with `broker_connect_failed` in one sentence. */
export async function connectSupervisor(d: SupervisorDial): Promise<NatsConnection> {
  try {
    const opts = {
      servers: d.servers,
      // Read at every (re)connect: a renewal swaps the text and reconnects onto it.
      authenticator: credsAuthenticatorFast(() => d.creds()),
      inboxPrefix: `_INBOX_${d.connId}`,
      name: `cotal-supervise:${d.space}`,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    };
    if (!d.waitForBroker) return await connect(opts);
    return await connectWhenUp(opts, {
      waiting: (why) => d.log(`manager: the broker is not up (${why}); waiting for it`),
      signal: d.signal,
    });
  } catch (err) {
    throw new CotalError(
      "broker_connect_failed",
      `The manager could not connect to ${d.servers.join(", ")} (${
        errorText(err)
      }); check the broker runs and holds this space's account.`,
    );
  }
}

/** Logs the connection's outages and runs `onReconnect` each time it is back. */
export function watchSupervisorConnection(
  nc: NatsConnection,
  log: (line: string) => void,
  onReconnect: () => void,
): void {
  (async () => {
    for await (const st of nc.status()) {
      if (st.type === "disconnect") log("manager: broker connection lost; reconnecting");
      else if (st.type === "reconnect") {
        log("manager: broker connection back");
        onReconnect();
      }
    }
  })().catch(() => {});
}

/** Proves `creds` on a throwaway connection (a re-signed daemon cred, before it is stored). */
export async function probeCreds(servers: string[], creds: string): Promise<boolean> {
  const nc = await connect({
    servers,
    authenticator: credsAuthenticatorFast(creds),
    maxReconnectAttempts: 0,
    name: "cotal-supervise preflight",
  });
  await nc.close();
  return true;
}

/**
 * The supervisor's own endpoint (presence as `manager`, the roster it reads; it consumes
 * nothing). Its warnings are often caused by what members write (a malformed presence row): at
 * most a few of each kind a minute reach the log.
 */
export async function startSupervisorEndpoint(opts: {
  space: string;
  servers: string[];
  principal: Principal;
  creds: () => Promise<string>;
  log: (line: string) => void;
}): Promise<CotalEndpoint> {
  const ep = new CotalEndpoint({
    space: opts.space,
    servers: opts.servers,
    card: {
      name: "manager",
      kind: "endpoint",
      description: "the space's supervisor, which starts and stops agents",
      ...opts.principal,
    },
    creds: opts.creds,
    consume: false,
  });
  const warn = limitLog(opts.log);
  ep.addEventListener(
    "warning",
    (ev) => warn(ev.error.code ?? "warning", `manager: ${ev.error.message}`),
  );
  await ep.start();
  return ep;
}
