/**
 * The agent's channels as MCP resources, for clients that read resources: each joined channel is
 * `cotal://channel/<name>`, whose content is its latest messages (the `history` tool's window,
 * oldest first, as JSON). A client may subscribe to one; when a message arrives on it, the server
 * sends `notifications/resources/updated` for its URI, and the client reads it again. The list
 * changes (`notifications/resources/list_changed`) when the agent joins or leaves a channel.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { MeshAgent } from "./tools.ts";
import { toolMessage } from "./tools.ts";

/** The URI scheme and path of a channel resource. */
export const CHANNEL_URI_PREFIX = "cotal://channel/";
/** How many messages a channel resource holds. */
export const CHANNEL_RESOURCE_MESSAGES = 50;

/** The URI of `channel`'s resource. */
export function channelUri(channel: string): string {
  return `${CHANNEL_URI_PREFIX}${encodeURIComponent(channel)}`;
}

/** The channel a resource URI names, or a one-sentence refusal. */
export function channelOfUri(uri: string, joined: readonly string[]): string {
  const channel = uri.startsWith(CHANNEL_URI_PREFIX)
    ? decodeURIComponent(uri.slice(CHANNEL_URI_PREFIX.length))
    : undefined;
  if (channel === undefined || !joined.includes(channel)) {
    throw new CotalError(
      "resource_unknown",
      `There is no resource ${JSON.stringify(uri.slice(0, 200))}; the resources are the joined ` +
        `channels (${joined.map(channelUri).join(", ") || "none"}).`,
    );
  }
  return channel;
}

/** The resource list: one per joined channel. */
export function listChannelResources(agent: MeshAgent) {
  return agent.joinedChannels().map((c) => ({
    uri: channelUri(c),
    name: `#${c}`,
    description: `The latest ${CHANNEL_RESOURCE_MESSAGES} messages of #${c}, oldest first.`,
    mimeType: "application/json",
  }));
}

/** A channel resource's content. */
export async function readChannelResource(agent: MeshAgent, uri: string) {
  const channel = channelOfUri(uri, agent.joinedChannels());
  const msgs = await agent.channelHistory(channel, { limit: CHANNEL_RESOURCE_MESSAGES });
  return {
    contents: [{
      uri,
      mimeType: "application/json",
      text: JSON.stringify({ channel, messages: msgs.map((m) => toolMessage(m, "channel")) }),
    }],
  };
}

/** Which channel resources a client subscribed to. */
export class ResourceSubscriptions {
  readonly #uris = new Set<string>();

  subscribe(agent: MeshAgent, uri: string): void {
    channelOfUri(uri, agent.joinedChannels());
    this.#uris.add(uri);
  }

  unsubscribe(uri: string): void {
    this.#uris.delete(uri);
  }

  /** The subscribed URI a message on `channel` updates, if any. */
  updated(channel: string): string | undefined {
    const uri = channelUri(channel);
    return this.#uris.has(uri) ? uri : undefined;
  }
}
