/**
 * The mesh as MCP tools: what each tool takes (a strict JSON Schema: unknown arguments are
 * refused), what it does through the agent's endpoint and inbox, and what it answers. Every
 * refusal is a `CotalError` whose sentence becomes the tool error a model reads.
 *
 * @module
 */
import { CotalError, isCotalError } from "../errors.ts";
import type { ArtifactPart, CotalMessage, DataPart, Part, TextPart } from "../wire/mod.ts";
import type { Presence } from "../endpoint/mod.ts";
import type { InboxEntry, InboxJournal } from "./journal.ts";

/** What the tools need of an endpoint (a `CotalEndpoint` is one). */
export interface MeshAgent {
  readonly id: string;
  multicast(text: string, opts: { channel: string; replyTo?: string }): Promise<CotalMessage>;
  unicast(to: string, text: string, opts?: { replyTo?: string }): Promise<CotalMessage>;
  anycast(role: string, text: string, opts?: { replyTo?: string }): Promise<CotalMessage>;
  joinChannel(channel: string): Promise<{ joined: boolean; durable: boolean; reason?: string }>;
  leaveChannel(channel: string): Promise<{ left: boolean }>;
  joinedChannels(): string[];
  channelHistory(channel: string, opts?: { limit?: number }): Promise<CotalMessage[]>;
  getRoster(): Presence[];
  /**
   * Whether a DM to `to`, or a task to `role`, would be kept (the space's delivery daemon
   * says); undefined when nobody can say. Absent: never asked.
   */
  recipientKnown?(target: { to: string } | { role: string }): Promise<boolean | undefined>;
}

/** A JSON Schema property this module uses. */
type Prop =
  | { type: "string"; description: string; maxLength?: number; enum?: readonly string[] }
  | { type: "integer"; description: string; minimum: number; maximum: number };

/** One MCP tool: its name, the sentence a model acts on, its schema, its work. */
export interface MeshTool {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: {
    type: "object";
    properties: Record<string, Prop>;
    required: string[];
    additionalProperties: false;
  };
  run(args: Record<string, unknown>): Promise<unknown>;
}

/** The longest wait a `wait` or `task` call may ask for, in seconds. */
export const MAX_WAIT_SECONDS = 300;
/** The most messages one `inbox`, `wait` or `history` call returns. */
export const MAX_BATCH = 100;
/** The longest text a tool takes (what DM and TASK store, less the envelope). */
export const MAX_TEXT_CHARS = 60_000;

const text = (d: string): Prop => ({ type: "string", description: d, maxLength: MAX_TEXT_CHARS });
const name = (d: string): Prop => ({ type: "string", description: d, maxLength: 256 });
const count = (d: string, max: number): Prop => ({
  type: "integer",
  description: d,
  minimum: 1,
  maximum: max,
});

/** A strict object schema: these properties, these required, nothing else. */
export function schema(
  properties: Record<string, Prop>,
  required: string[],
): MeshTool["inputSchema"] {
  return { type: "object", properties, required, additionalProperties: false };
}

/** Checks `args` against `tool`'s schema; one sentence naming the first thing wrong. */
export function checkArguments(tool: MeshTool, args: unknown): Record<string, unknown> {
  const bad = (why: string): never => {
    throw new CotalError("mcp_bad_arguments", `${tool.name}: ${why}`);
  };
  if (args === undefined || args === null) args = {};
  if (typeof args !== "object" || Array.isArray(args)) bad("the arguments must be an object.");
  const a = args as Record<string, unknown>;
  const props = tool.inputSchema.properties;
  for (const k of Object.keys(a)) {
    // Own keys only: `in` is also true of what every object inherits (`constructor`, ...).
    if (!Object.hasOwn(props, k)) {
      bad(`${JSON.stringify(k)} is not an argument; it takes ${Object.keys(props).join(", ")}.`);
    }
  }
  for (const k of tool.inputSchema.required) if (a[k] === undefined) bad(`${k} is required.`);
  for (const [k, p] of Object.entries(props)) {
    const v = a[k];
    if (v === undefined) continue;
    if (p.type === "string") {
      if (typeof v !== "string") bad(`${k} must be a string.`);
      const s = v as string;
      if (p.maxLength !== undefined && s.length > p.maxLength) {
        bad(`${k} is ${s.length} characters, over ${p.maxLength}; send large content as a file.`);
      }
      if (p.enum && !p.enum.includes(s)) bad(`${k} must be one of ${p.enum.join(", ")}.`);
    } else if (!Number.isInteger(v) || (v as number) < p.minimum || (v as number) > p.maximum) {
      bad(`${k} must be a whole number from ${p.minimum} to ${p.maximum}.`);
    }
  }
  return a;
}

/** A message as a model reads it. */
export interface ToolMessage {
  id: string;
  kind: "channel" | "dm" | "task";
  /**
   * The sender's principal, which the broker bound to it. Its display name is not shown: a
   * sender writes that as it likes (red team 26 wrote "operator").
   */
  from: string;
  channel?: string;
  role?: string;
  text: string;
  replyTo?: string;
  at: string;
}

function partText(p: Part): string {
  if (p.kind === "text") return (p as TextPart).text;
  if (p.kind === "data") return JSON.stringify((p as DataPart).data);
  if (p.kind === "artifact") {
    const a = p as ArtifactPart;
    return `[artifact ${a.name} (${a.mediaType}, ${a.size} bytes, ${a.digest})]`;
  }
  return `[${p.kind} part]`;
}

/** Renders a message for the model: who, where, what. */
export function toolMessage(m: CotalMessage, kind?: ToolMessage["kind"]): ToolMessage {
  const k = kind ?? (m.channel !== undefined ? "channel" : m.to !== undefined ? "dm" : "task");
  return {
    id: m.id,
    kind: k,
    from: m.from.id,
    ...(m.channel !== undefined ? { channel: m.channel } : {}),
    ...(m.toService !== undefined ? { role: m.toService } : {}),
    text: m.parts.map(partText).join("\n"),
    ...(m.replyTo ? { replyTo: m.replyTo } : {}),
    at: new Date(m.ts).toISOString(),
  };
}

function fromEntries(entries: readonly InboxEntry[]): ToolMessage[] {
  return entries.map(shownEntry);
}

/**
 * An inbox entry as the model reads it; one that cannot be rendered (an inbox written before
 * receipt checked every part) is shown as such, so it never holds back the others or stays at
 * the head of the inbox for good (red team 28).
 */
function shownEntry(e: InboxEntry): ToolMessage {
  try {
    return toolMessage(e.message, e.kind);
  } catch {
    return {
      id: String(e.message?.id),
      kind: e.kind,
      from: String(e.message?.from?.id),
      text: "[a message that could not be shown]",
      at: new Date(e.at).toISOString(),
    };
  }
}

/** Hands out up to `max` unread messages (read on disk at the client's next request). */
function takeUnread(inbox: InboxJournal, max: number) {
  const entries = inbox.unread(max + 1);
  const taken = entries.slice(0, max);
  // Rendered before they count as handed out: one that cannot be shown must not take the
  // others of its batch with it (red team 27).
  const messages = fromEntries(taken);
  inbox.handOut(taken);
  return Promise.resolve({ messages, more: entries.length > max });
}

/** The tools of one agent, over its endpoint and inbox. */
export function meshTools(agent: MeshAgent, inbox: InboxJournal): MeshTool[] {
  return [...sendingTools(agent, inbox), ...readingTools(agent, inbox)];
}

/** `post`, `dm`, `task` and `reply`: what the agent sends. */
function sendingTools(agent: MeshAgent, inbox: InboxJournal): MeshTool[] {
  return [
    {
      name: "post",
      description: "Post a message to a channel you have joined (see `channels`).",
      inputSchema: schema({
        channel: name("the channel, e.g. general"),
        text: text("the message"),
        reply_to: name("the id of the message this answers, if any"),
      }, ["channel", "text"]),
      async run(a) {
        const m = await agent.multicast(String(a.text), {
          channel: String(a.channel),
          ...(a.reply_to ? { replyTo: String(a.reply_to) } : {}),
        });
        return { id: m.id };
      },
    },
    {
      name: "dm",
      description:
        "Send a direct message to one peer, by its id (e.g. local.bob, from `presence`). It waits for a peer of this space that is offline; an id with no agent in the space is refused.",
      inputSchema: schema({
        to: name("the peer's id, owner.actor"),
        text: text("the message"),
        reply_to: name("the id of the message this answers, if any"),
      }, ["to", "text"]),
      async run(a) {
        // The broker acknowledges a DM to an id with no agent and keeps nothing: refused here,
        // as `cotal send` refuses it (newcomer pass 8: the model was told it was sent).
        if (await agent.recipientKnown?.({ to: String(a.to) }) === false) {
          throw new CotalError(
            "recipient_unknown",
            `${String(a.to)} has no agent in this space, so a DM to it would not be kept; ` +
              "check the id with `presence`.",
          );
        }
        const m = await agent.unicast(String(a.to), String(a.text), {
          ...(a.reply_to ? { replyTo: String(a.reply_to) } : {}),
        });
        return { id: m.id };
      },
    },
    {
      name: "task",
      description:
        "Hand work to whichever agent serves a role (a role no agent was ever given is refused). With wait_seconds, also wait that long for the reply and return it.",
      inputSchema: schema({
        role: name("the role, e.g. reviewer"),
        text: text("what to do"),
        wait_seconds: count(
          "how long to wait for the reply (default: do not wait)",
          MAX_WAIT_SECONDS,
        ),
      }, ["role", "text"]),
      async run(a) {
        if (await agent.recipientKnown?.({ role: String(a.role) }) === false) {
          throw new CotalError(
            "role_unknown",
            `No agent in this space was ever given the role ${
              JSON.stringify(String(a.role))
            }, so a task to it would not be kept.`,
          );
        }
        const m = await agent.anycast(String(a.role), String(a.text));
        const wait = a.wait_seconds as number | undefined;
        if (!wait) return { id: m.id };
        const deadline = Date.now() + wait * 1000;
        for (;;) {
          // The answer comes to the asker: a DM. A channel post naming the id is no answer
          // (red team 30: a member that learned the id answered in front of the channel).
          const reply = inbox.unread().find((e) => e.kind === "dm" && e.message.replyTo === m.id);
          if (reply) {
            const shown = shownEntry(reply);
            inbox.handOut([reply]);
            return { id: m.id, reply: shown };
          }
          const left = deadline - Date.now();
          if (left <= 0) return { id: m.id, reply: null, timedOut: true };
          await inbox.arrival(left);
        }
      },
    },
    {
      name: "reply",
      description:
        "Answer a message from your inbox by its id: a channel post in its channel, a DM or task to its sender.",
      inputSchema: schema({
        message_id: name("the id of the message to answer"),
        text: text("the answer"),
        from: name("the sender's id, needed only when two messages in your inbox share the id"),
      }, ["message_id", "text"]),
      async run(a) {
        const e = messageToAnswer(inbox, String(a.message_id), a.from as string | undefined);
        const opts = { replyTo: e.message.id };
        const m = e.kind === "channel"
          ? await agent.multicast(String(a.text), { channel: e.message.channel!, ...opts })
          : await agent.unicast(e.message.from.id, String(a.text), opts);
        return { id: m.id };
      },
    },
  ];
}

/**
 * The inbox entry `reply` answers. An id alone is enough while one sender used it; a sender
 * picks its ids, so a member could copy a channel post's id onto a DM and take the answer
 * meant for the channel (red team 29): two senders of one id are refused until `from` says which.
 */
function messageToAnswer(inbox: InboxJournal, id: string, from?: string): InboxEntry {
  const all = inbox.findAll(id);
  const senders = [...new Set([...inbox.sendersOf(id), ...all.map((e) => e.message.from.id)])];
  if (from === undefined && senders.length > 1) {
    throw new CotalError(
      "mcp_ambiguous_message",
      `Messages from ${senders.map((x) => JSON.stringify(x)).join(" and ")} share the id ${
        JSON.stringify(id)
      }; pass from with the sender of the one to answer.`,
    );
  }
  const matching = from === undefined ? all : all.filter((e) => e.message.from.id === from);
  if (matching.length === 0) {
    const gone = from === undefined ? senders.length > 0 : senders.includes(from);
    throw new CotalError(
      "mcp_unknown_message",
      gone
        ? `The message ${JSON.stringify(id)} was read and has left your inbox; answer with post ` +
          `(in its channel) or dm (to its sender) instead.`
        : `No message ${JSON.stringify(id)}${
          from === undefined ? "" : ` from ${JSON.stringify(from)}`
        } is in your inbox; reply to an id that inbox or wait returned.`,
    );
  }
  return matching[matching.length - 1];
}

/** `inbox`, `wait`, `presence`, `channels` and `history`: what the agent reads. */
function readingTools(agent: MeshAgent, inbox: InboxJournal): MeshTool[] {
  return [
    {
      name: "inbox",
      description:
        "What reached you since you last read (channel posts, DMs, tasks), oldest first. Each message is returned once.",
      inputSchema: schema(
        { max: count("the most messages to return (default 20)", MAX_BATCH) },
        [],
      ),
      run: (a) => takeUnread(inbox, (a.max as number | undefined) ?? 20),
    },
    {
      name: "wait",
      description:
        "Wait until something reaches you, or the timeout passes, then return it like inbox. Use it to idle between tasks.",
      inputSchema: schema({
        timeout_seconds: count("how long to wait (default 30)", MAX_WAIT_SECONDS),
        max: count("the most messages to return (default 20)", MAX_BATCH),
      }, []),
      async run(a) {
        const deadline = Date.now() + ((a.timeout_seconds as number | undefined) ?? 30) * 1000;
        while (inbox.unread(1).length === 0 && Date.now() < deadline) {
          await inbox.arrival(deadline - Date.now());
        }
        return await takeUnread(inbox, (a.max as number | undefined) ?? 20);
      },
    },
    {
      name: "presence",
      description: "Who is online in the space: id, name, role, status.",
      inputSchema: schema({}, []),
      run() {
        const peers = agent.getRoster().map((p) => ({
          id: p.card.id,
          name: p.card.name,
          ...(p.card.role ? { role: p.card.role } : {}),
          status: p.status,
          ...(p.activity ? { activity: p.activity } : {}),
          ...(p.card.id === agent.id ? { you: true } : {}),
        }));
        return Promise.resolve({ peers });
      },
    },
    {
      name: "channels",
      description:
        "List the channels you have joined, or join or leave one (only channels your grants allow).",
      inputSchema: schema({
        action: {
          type: "string",
          description: "list, join or leave",
          enum: ["list", "join", "leave"],
        },
        channel: name("the channel to join or leave"),
      }, ["action"]),
      async run(a) {
        if (a.action === "list") return { joined: agent.joinedChannels() };
        if (a.channel === undefined) {
          throw new CotalError("mcp_bad_arguments", `channels: ${a.action} needs a channel.`);
        }
        if (a.action === "join") {
          const r = await agent.joinChannel(String(a.channel));
          if (!r.joined) {
            throw new CotalError(
              "mcp_channel_refused",
              `Could not join #${a.channel}${r.reason ? `: ${r.reason}` : ""}.`,
            );
          }
          return { joined: agent.joinedChannels(), durable: r.durable };
        }
        const r = await agent.leaveChannel(String(a.channel));
        return { left: r.left, joined: agent.joinedChannels() };
      },
    },
    {
      name: "history",
      description:
        "The latest messages of a joined channel, oldest first (does not mark anything read).",
      inputSchema: schema({
        channel: name("the channel"),
        limit: count("how many (default 20)", MAX_BATCH),
      }, ["channel"]),
      async run(a) {
        const msgs = await agent.channelHistory(String(a.channel), {
          limit: (a.limit as number | undefined) ?? 20,
        });
        return { messages: msgs.map((m) => toolMessage(m, "channel")) };
      },
    },
  ];
}

/** The text of a tool error: the CotalError's sentence, or a generic one naming the tool. */
export function toolErrorText(tool: string, err: unknown): string {
  if (isCotalError(err)) return err.message;
  return `${tool} failed: ${(err as Error)?.message ?? String(err)}`;
}
