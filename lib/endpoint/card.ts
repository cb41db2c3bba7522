/**
 * The endpoint's card and options: the caller's input checked up front, and the published card whose
 * identity fields come from the authenticated principal.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import {
  assertValidChannel,
  assertValidLifecycleUid,
  assertValidRole,
  type Principal,
} from "../wire/mod.ts";
import {
  type AgentCard,
  type AgentCardInput,
  type EndpointOptions,
  PROTOCOL_VERSION,
} from "./types.ts";
import { droppedCardField, MAX_NAME_LENGTH, MAX_ROW_ITEMS, MAX_ROW_TEXT } from "./presence_row.ts";

export { MAX_NAME_LENGTH };

/** Refuse options an endpoint could not start with: a space, a card, a uid and channels. */
export function checkOptions(opts: EndpointOptions): void {
  if (typeof opts?.space !== "string" || opts.space.trim() === "") {
    throw new CotalError("invalid_space", "The endpoint needs a space name; pass opts.space.");
  }
  checkCard(opts.card);
  if (opts.lifecycleUid !== undefined) assertValidLifecycleUid(opts.lifecycleUid);
  for (const ch of opts.channels ?? []) assertValidChannel(ch);
}

/** Refuse a card a peer could not render or address. */
export function checkCard(card: AgentCardInput): void {
  const name = card?.name;
  if (
    typeof name !== "string" || name === "" || name.length > MAX_NAME_LENGTH ||
    name.includes("/") || name.trim() !== name
  ) {
    throw new CotalError(
      "invalid_card",
      `The card name must be 1-${MAX_NAME_LENGTH} characters with no "/" and no surrounding whitespace.`,
    );
  }
  if (card.role !== undefined) assertValidRole(card.role);
  if (card.kind !== undefined && card.kind !== "agent" && card.kind !== "endpoint") {
    throw new CotalError("invalid_card", 'The card kind must be "agent" or "endpoint".');
  }
  // What peers would leave out of the row is refused here, so a card is shown as it was given.
  const dropped = droppedCardField(card);
  if (dropped !== undefined) {
    throw new CotalError(
      "invalid_card",
      `The card's ${dropped} is malformed or too large: text fields hold at most ` +
        `${MAX_ROW_TEXT} characters, names and tags 128, lists and meta ${MAX_ROW_ITEMS} items.`,
    );
  }
}

/** The published card: `id`, `owner` and `actor` are always the authenticated principal's. */
export function buildCard(input: AgentCardInput, p: Principal): AgentCard {
  return {
    ...structuredClone(input),
    id: `${p.owner}.${p.actor}`,
    owner: p.owner,
    actor: p.actor,
    kind: input.kind ?? "agent",
    protocolVersion: PROTOCOL_VERSION,
  };
}
