/**
 * The raw connection edges npm:nats reports: transport drops and reconnects (the library's
 * own retries), publish denials, and the terminal close that hands over to the endpoint's
 * rebuild.
 *
 * @module
 */

import { Events, type NatsConnection } from "nats";
import { CotalError } from "../errors.ts";

/** What to do at each edge. */
export interface ConnectionHandlers {
  /** False once the endpoint has moved on to another connection (stale reports are ignored). */
  current(): boolean;
  disconnected(server: string): void;
  reconnected(server: string): void;
  error(err: CotalError): void;
  closed(err: Error | void): void;
}

/** Watch `nc` until it closes. */
export function watchConnection(nc: NatsConnection, h: ConnectionHandlers): void {
  (async () => {
    for await (const s of nc.status()) {
      if (!h.current()) return;
      if (s.type === Events.Disconnect) h.disconnected(String(s.data));
      else if (s.type === Events.Reconnect) h.reconnected(String(s.data));
      else if (s.type === Events.Error && s.permissionContext?.operation === "publish") {
        // Subscription refusals are reported by the subscription itself; this covers the
        // fire-and-forget publishes (acks, heartbeats) that have no caller to throw to.
        h.error(
          new CotalError(
            "permission_denied",
            `The broker denied a publish to ${s.permissionContext.subject} (denied, not absent).`,
          ),
        );
      }
    }
  })().catch(() => {});
  nc.closed().then((err) => {
    if (h.current()) h.closed(err);
  });
}
