/**
 * `cotal mcp`: one agent of a space as an MCP server over stdio, built on the official SDK's
 * low-level `Server` (the tools carry their own JSON Schemas, see lib/mcp/tools.ts). What
 * reaches the agent goes into its on-disk inbox first (lib/mcp/journal.ts), and a copy the
 * broker holds is acked only once it is written there. Stdout carries the protocol alone;
 * everything else goes to stderr.
 *
 * @module
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { listChannelResources, readChannelResource, ResourceSubscriptions } from "./resources.ts";
import { isCotalError } from "../errors.ts";
import { seenKey, startWaitingForBroker } from "../endpoint/mod.ts";
import type { CotalEndpoint, CotalMessageEvent, Delivery } from "../endpoint/mod.ts";
import type { InboxJournal, InboxKind } from "./journal.ts";
import type { CotalMessage } from "../wire/mod.ts";
import { checkArguments, type MeshTool, meshTools, toolErrorText } from "./tools.ts";
import { spawnTools } from "./spawn_tools.ts";

/**
 * MCP's "resource not found" (its specification's -32002): an unknown resource was reported
 * as an internal error (-32603), which tells a client to retry (newcomer pass 8).
 */
export const RESOURCE_NOT_FOUND = -32002;

/** Rethrows a refusal of the client's request as the protocol error it is. */
function protocolError(err: unknown): never {
  if (isCotalError(err, "resource_unknown")) throw new McpError(RESOURCE_NOT_FOUND, err.message);
  throw err;
}

/** Options of {@linkcode serveMcp}. */
export interface ServeMcpOptions {
  /** The agent's endpoint, not started yet (its `message` listener is added here). */
  readonly endpoint: CotalEndpoint;
  readonly inbox: InboxJournal;
  /** The server's version, as MCP clients see it. */
  readonly version: string;
  /** Where warnings go (default stderr). */
  readonly log?: (line: string) => void;
  /** The agent's spawn channel and the personas it may spawn (its launch material's). */
  readonly spawn?: { readonly socket: string; readonly personas: readonly string[] };
  /** The transport (default stdio). */
  readonly transport?: StdioServerTransport;
}

function kindOf(ev: CotalMessageEvent): InboxKind {
  const m = ev.message;
  return m.channel !== undefined ? "channel" : m.to !== undefined ? "dm" : "task";
}

/** How often copies kept unsettled until read are reported as being worked on. */
export const HELD_WORKING_MS = 20_000;

/**
 * Keeps every arriving message in `inbox`. A copy the broker holds for the agent (a DM, a task,
 * a durable channel copy) stays unsettled until the harness has read it, and is acked then: the
 * broker, not the inbox file, is what keeps it. A sandboxed agent's inbox is on its RAM home,
 * which a restart of its runner empties (fault pass 9 lost every unread DM that way); the broker
 * delivers the copy again to the next `cotal mcp`. Until it is read it is reported as being
 * worked on, so the broker does not redeliver it to this one. Returns a stop function.
 */
export function collectInto(
  endpoint: CotalEndpoint,
  inbox: InboxJournal,
  log: (l: string) => void,
): () => void {
  const unread = new Map<string, Delivery>();
  const settle = (message: CotalMessage, delivery: Delivery) => {
    if (inbox.isRead(message)) delivery.ack().catch(() => {});
    else unread.set(seenKey(message), delivery);
  };
  inbox.onRead = (entries) => {
    for (const e of entries) {
      const key = seenKey(e.message);
      const d = unread.get(key);
      if (!d) continue;
      unread.delete(key);
      d.ack().catch(() => {});
    }
  };
  const working = setInterval(() => {
    for (const d of unread.values()) d.working();
  }, HELD_WORKING_MS);
  endpoint.addEventListener("message", (ev) => {
    if (ev.meta.historical) return;
    const held = ev.delivery.durable && !ev.delivery.settled;
    if (held) ev.preventDefault();
    inbox.append(kindOf(ev), ev.message).then(
      () => {
        if (held) settle(ev.message, ev.delivery);
      },
      (err) => {
        log(`cotal mcp: could not keep a message in the inbox (${(err as Error).message})`);
        // The broker delivers it again.
        if (held) ev.delivery.nak(5_000);
      },
    );
  });
  return () => {
    clearInterval(working);
    unread.clear();
  };
}

/** Answers one tool call: the tool's JSON result, or a one-sentence tool error. */
export async function callTool(
  tools: readonly MeshTool[],
  name: string,
  args: unknown,
): Promise<CallToolResult> {
  const tool = tools.find((t) => t.name === name);
  if (!tool) {
    return {
      isError: true,
      content: [{
        type: "text",
        text: `There is no tool ${JSON.stringify(name)}; the tools are ${
          tools.map((t) => t.name).join(", ")
        }.`,
      }],
    };
  }
  try {
    const result = await tool.run(checkArguments(tool, args));
    return {
      content: [{ type: "text", text: JSON.stringify(result) }],
      structuredContent: result as Record<string, unknown>,
    };
  } catch (err) {
    return { isError: true, content: [{ type: "text", text: toolErrorText(name, err) }] };
  }
}

/**
 * Starts the endpoint and serves the mesh tools until the client closes the transport (or
 * `stop()` is called); resolves once serving.
 */
export async function serveMcp(
  opts: ServeMcpOptions,
): Promise<{ closed: Promise<void>; stop(): Promise<void> }> {
  const log = opts.log ?? ((l: string) => console.error(l));
  const { endpoint, inbox } = opts;
  const stopCollecting = collectInto(endpoint, inbox, log);
  endpoint.addEventListener("warning", (ev) => log(`cotal mcp: ${ev.error.message}`));
  endpoint.addEventListener("error", (ev) => log(`cotal mcp: ${ev.error.message}`));
  // A broker that is down is waited for, not a reason to exit (fault pass 8: the program that
  // started its cotal-mcp was left off the mesh while it ran on).
  await startWaitingForBroker(endpoint, {
    waiting: (err) => log(`cotal mcp: ${err.message} Waiting for it.`),
    back: () => log("cotal mcp: on the mesh"),
  });
  const tools = [
    ...meshTools(endpoint, inbox),
    ...(opts.spawn ? spawnTools(opts.spawn) : []),
  ];
  const server = new Server(
    { name: "cotal", version: opts.version },
    {
      capabilities: { tools: {}, resources: { subscribe: true, listChanged: true } },
      instructions: `You are ${endpoint.id} in the Cotal space '${endpoint.space}'. ` +
        "Use `wait` to receive work, `reply` to answer it, `presence` to see peers.",
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, () =>
    Promise.resolve({
      tools: tools.map((t) => ({
        name: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
      })),
    }));
  server.setRequestHandler(
    CallToolRequestSchema,
    async (req: { params: { name: string; arguments?: Record<string, unknown> } }) => {
      // A request shows the client took the last answer: what it handed out is read now.
      await inbox.settleHandedOut();
      const result = await callTool(tools, req.params.name, req.params.arguments);
      // A join or leave changes which channel resources there are.
      if (
        req.params.name === "channels" && !result.isError &&
        req.params.arguments?.action !== "list"
      ) {
        server.sendResourceListChanged().catch(() => {});
      }
      return result;
    },
  );
  const subscriptions = new ResourceSubscriptions();
  server.setRequestHandler(
    ListResourcesRequestSchema,
    () => Promise.resolve({ resources: listChannelResources(endpoint) }),
  );
  server.setRequestHandler(
    ReadResourceRequestSchema,
    (req: { params: { uri: string } }) =>
      readChannelResource(endpoint, req.params.uri).catch(protocolError),
  );
  server.setRequestHandler(SubscribeRequestSchema, (req: { params: { uri: string } }) => {
    try {
      subscriptions.subscribe(endpoint, req.params.uri);
    } catch (err) {
      protocolError(err);
    }
    return Promise.resolve({});
  });
  server.setRequestHandler(UnsubscribeRequestSchema, (req: { params: { uri: string } }) => {
    subscriptions.unsubscribe(req.params.uri);
    return Promise.resolve({});
  });
  endpoint.addEventListener("message", (ev) => {
    const channel = ev.message.channel;
    const uri = channel !== undefined && !ev.meta.historical
      ? subscriptions.updated(channel)
      : undefined;
    if (uri) server.sendResourceUpdated({ uri }).catch(() => {});
  });
  let done: () => void = () => {};
  const closed = new Promise<void>((r) => (done = r));
  server.onclose = () => done();
  await server.connect(opts.transport ?? new StdioServerTransport());
  const stop = async () => {
    stopCollecting();
    await server.close().catch(() => {});
    await endpoint.stop().catch(() => {});
    done();
  };
  closed.then(() => {
    stopCollecting();
    return endpoint.stop().catch(() => {});
  });
  return { closed, stop };
}
