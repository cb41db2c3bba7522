/**
 * `cotal mcp`: joins a space as one agent and serves the mesh as MCP tools on stdio. It starts
 * from the launch material a spawned agent holds (`--launch`, default `$COTAL_LAUNCH`), or from
 * a creds file for a harness the operator runs by hand (`--creds` with `--space`,
 * `--lifecycle` and `--server`).
 *
 * @module
 */
import { defineCommand } from "../cli/mod.ts";
import { CotalEndpoint, parseHeldCreds } from "../endpoint/mod.ts";
import { CotalError, isCotalError } from "../errors.ts";
import { assertValidLifecycleUid } from "../wire/mod.ts";
import { agentEndpoint, readLaunchMaterial } from "../manager/mod.ts";
import { registry } from "../registry.ts";
import { lookupMesh } from "../workspace/mod.ts";
import { InboxJournal } from "./journal.ts";
import { serveMcp } from "./server.ts";
import process from "node:process";
import config from "../../deno.json" with { type: "json" };

/** Where an agent's inbox lives unless `--inbox` says otherwise. */
export function defaultInboxDir(space: string, id: string): string {
  const state = Deno.env.get("XDG_STATE_HOME") ??
    `${Deno.env.get("HOME") ?? "/tmp"}/.local/state`;
  return `${state}/cotal/mcp/${encodeURIComponent(space)}/${id}`;
}

async function fromCreds(values: {
  creds: string;
  space?: string;
  server?: string;
  lifecycle?: string;
  "lifecycle-uid"?: string;
  role?: string;
  channel?: string[];
}): Promise<{ endpoint: CotalEndpoint; id: string }> {
  // `--lifecycle`, as mint, deprovision and spawn name it; `--lifecycle-uid` is still taken.
  const lifecycleUid = values.lifecycle ?? values["lifecycle-uid"];
  if (!values.space || !lifecycleUid) {
    throw new CotalError(
      "usage",
      "--creds needs --space and --lifecycle (the agent's lifecycle, which its DM queue is keyed on).",
    );
  }
  // The uid `cotal mint --provision` printed with this cred; an embedder's names are not the
  // CLI user's (newcomer pass 8 was told to "mint one with newLifecycleUid()").
  try {
    assertValidLifecycleUid(lifecycleUid);
  } catch {
    throw new CotalError(
      "usage",
      `--lifecycle ${
        JSON.stringify(lifecycleUid)
      } is not a lifecycle uid; pass the one 'cotal mint --provision' printed with this cred.`,
    );
  }
  const text = await Deno.readTextFile(values.creds).catch(() => {
    throw new CotalError("usage", `The creds file ${JSON.stringify(values.creds)} cannot be read.`);
  });
  const principal = (await parseHeldCreds(text)).principal;
  if (!principal) {
    throw new CotalError(
      "usage",
      "The creds do not name a principal (owner and actor tags); use an agent cred of the space.",
    );
  }
  const { owner, actor } = principal;
  const endpoint = new CotalEndpoint({
    space: values.space,
    servers: (values.server ?? await registeredServer(values.space)).split(","),
    card: { name: actor, owner, actor, ...(values.role ? { role: values.role } : {}) },
    lifecycleUid,
    creds: text,
    ...(values.channel?.length ? { channels: values.channel } : {}),
    // It keeps messages itself and settles each copy once the harness read it (collectInto).
    dedupeDurable: false,
  });
  return { endpoint, id: `${owner}.${actor}` };
}

/**
 * The broker of the mesh this machine runs for `space` (its registry entry), when `--server`
 * is not given. Newcomer pass 9 ran `cotal mcp --creds` without `--server` and it waited on
 * port 4222, where no broker was.
 */
async function registeredServer(space: string): Promise<string> {
  const entry = await lookupMesh(space).catch((err) => {
    if (!isCotalError(err, "mesh_ambiguous")) throw err;
    throw new CotalError("usage", err.message.replace(/pass --root <dir>/, "pass --server <url>"));
  });
  if (!entry) {
    throw new CotalError(
      "usage",
      `No mesh on this machine serves space ${
        JSON.stringify(space)
      }; pass --server <url> (the broker the cred was minted for).`,
    );
  }
  return entry.url;
}

/** `cotal mcp`. */
export const mcpCommand = defineCommand({
  kind: "command",
  name: "mcp",
  summary: "serve the mesh as MCP tools on stdio, as one agent (for Claude Code, Codex, ...)",
  flags: {
    launch: {
      type: "string",
      value: "file",
      description: "the agent's launch file (default $COTAL_LAUNCH, set in a spawned agent)",
    },
    creds: {
      type: "string",
      value: "file",
      description: "an agent cred instead of a launch file (with --space and --lifecycle)",
    },
    space: { type: "string", description: "the space (with --creds)" },
    server: {
      type: "string",
      value: "url",
      description: "broker URL(s), with --creds (default: the mesh this machine runs for --space)",
    },
    lifecycle: {
      type: "string",
      value: "uid",
      description: "the agent's lifecycle uid, as mint --provision printed it (with --creds)",
    },
    "lifecycle-uid": { type: "string", value: "uid", description: "the same as --lifecycle" },
    role: {
      type: "string",
      description: "the role whose tasks this agent takes (with --creds; its cred must grant it)",
    },
    channel: {
      type: "string",
      multiple: true,
      description: "a channel to join at start (with --creds)",
    },
    inbox: {
      type: "string",
      value: "dir",
      description: "where unread messages are kept (default $XDG_STATE_HOME/cotal/mcp/...)",
    },
  },
  async run({ values }) {
    let joined: {
      endpoint: CotalEndpoint;
      id: string;
      spawn?: { socket: string; personas: readonly string[] };
    };
    if (values.creds) {
      joined = await fromCreds({ ...values, creds: values.creds });
    } else {
      const path = values.launch ?? Deno.env.get("COTAL_LAUNCH");
      if (!path) {
        throw new CotalError(
          "usage",
          "cotal mcp needs --launch <file> (or $COTAL_LAUNCH, as in a spawned agent) or --creds <file>.",
        );
      }
      const launch = await readLaunchMaterial(path);
      joined = {
        // The channels the agent was spawned into: joined, so their posts reach the harness.
        endpoint: agentEndpoint(path, launch, {
          channels: launch.channels ?? [],
          dedupeDurable: false,
        }),
        id: `${launch.principal.owner}.${launch.principal.actor}`,
        ...(launch.sandbox?.spawn ? { spawn: launch.sandbox.spawn } : {}),
      };
    }
    const { endpoint, id, spawn } = joined;
    const inbox = await InboxJournal.open(values.inbox ?? defaultInboxDir(endpoint.space, id));
    const served = await serveMcp({
      endpoint,
      inbox,
      version: config.version,
      ...(spawn ? { spawn } : {}),
    }).catch((err) => {
      // A cred's grants name its own lifecycle's durables: another uid is refused by the
      // broker, which reads as a cred without the grant. Said as what it is.
      if (values.creds && isCotalError(err, "permission_denied") && /CONSUMER/.test(err.message)) {
        throw new CotalError(
          "lifecycle_mismatch",
          `The broker refused this cred the DM queue of lifecycle ${
            values.lifecycle ?? values["lifecycle-uid"]
          }: it is not the lifecycle the cred was provisioned with; pass the uid 'cotal mint --provision' printed with it.`,
          { cause: err },
        );
      }
      throw err;
    });
    for (const sig of ["SIGINT", "SIGTERM"] as const) {
      Deno.addSignalListener(sig, () => void served.stop());
    }
    // A client that closes our stdin is gone: stop rather than linger as an agent nobody drives.
    process.stdin.on("end", () => void served.stop());
    await served.closed;
  },
});

registry.register([mcpCommand]);
