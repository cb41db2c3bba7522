/**
 * What the storage warden's tests send: members' genuine messages (the envelope receivers
 * accept) of a chosen size, and bursts of them with a bounded number of acked publishes in
 * flight.
 */
import type { MsgHdrs, NatsConnection } from "nats";

const ENC = new TextEncoder();

/** A member's genuine message from `from` (`<owner>.<actor>`) of about `bytes` (at least its bare envelope). */
export function envelope(
  space: string,
  from: string,
  bytes = 0,
  id: string = crypto.randomUUID(),
): Uint8Array {
  const body = {
    id,
    ts: Date.now(),
    space,
    from: { id: from },
    parts: [{ kind: "text", text: "" }],
  };
  const bare = ENC.encode(JSON.stringify(body)).length;
  body.parts[0].text = "x".repeat(Math.max(0, bytes - bare));
  return ENC.encode(JSON.stringify(body));
}

/** Publishes `n` messages made by `make` on `subject`, 64 in flight; resolves the refusals. */
export async function burst(
  nc: NatsConnection,
  subject: string,
  n: number,
  make: () => { data: Uint8Array; headers?: MsgHdrs },
): Promise<number> {
  const js = nc.jetstream();
  let refused = 0;
  let inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    const m = make();
    inFlight.push(js.publish(subject, m.data, { headers: m.headers }).catch(() => refused++));
    if (inFlight.length >= 64) {
      await Promise.all(inFlight);
      inFlight = [];
    }
  }
  await Promise.all(inFlight);
  return refused;
}
