/**
 * Outgoing messages: the envelope and the subject of a multicast, unicast or anycast. The
 * sender tokens in the subject are the endpoint's own principal, which the broker's publish
 * grant forge-locks.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import {
  assertConcreteChannel,
  assertValidRole,
  buildMessage,
  chatSubject,
  type CotalMessage,
  instSubject,
  parsePrincipalId,
  type Principal,
  svcSubject,
} from "../wire/mod.ts";
import type { AgentCard, MulticastOptions, SendOptions } from "./types.ts";

/** Who sends. */
export interface Sender {
  space: string;
  principal: Principal;
  card: AgentCard;
}

/** Where a message goes. */
export type Route =
  | { channel: string; mentions?: string[] }
  | { to: string }
  | { toService: string };

/** Build the envelope and its subject. */
export function outgoing(
  from: Sender,
  route: Route,
  text: string,
  opts: SendOptions | MulticastOptions,
): { subject: string; msg: CotalMessage } {
  if (typeof text !== "string") {
    throw new CotalError("invalid_message", "The message text must be a string.");
  }
  const base = {
    space: from.space,
    from: {
      id: from.card.id,
      name: from.card.name,
      ...(from.card.role ? { role: from.card.role } : {}),
    },
    // An empty text with parts means "parts only".
    text: text === "" && opts.parts?.length ? undefined : text,
    parts: opts.parts,
    replyTo: opts.replyTo,
    contextId: opts.contextId,
  };
  if ("channel" in route) {
    assertConcreteChannel(route.channel);
    const msg = buildMessage({ ...base, channel: route.channel, mentions: route.mentions });
    return { subject: chatSubject(from.space, from.principal, route.channel), msg };
  }
  if ("to" in route) {
    const recipient = parsePrincipalId(route.to);
    const msg = buildMessage({ ...base, to: `${recipient.owner}.${recipient.actor}` });
    return { subject: instSubject(from.space, recipient, from.principal), msg };
  }
  assertValidRole(route.toService);
  const msg = buildMessage({ ...base, toService: route.toService });
  return { subject: svcSubject(from.space, route.toService, from.principal), msg };
}
