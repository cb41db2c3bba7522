/**
 * `cotal send`, `tail` and `join`: the operator's commands on a running space.
 *
 * @module
 */
import { safeText } from "../../safe_text.ts";
import { defineCommand, denoIo, JSON_FLAG, printResult, TextLineStream } from "../../cli/mod.ts";
import { CotalError } from "../../errors.ts";
import { registry } from "../../registry.ts";
import { assertValidSpaceName } from "../names.ts";
import { isLiveAgent, sendText, tail } from "../ops.ts";
import { join } from "../join.ts";
import { localActor, resolveMeshRoot, ROOT_FLAG, SPACE_FLAG } from "./common.ts";

/** `cotal send`: one text message as the local operator. */
export const sendCommand = defineCommand({
  kind: "command",
  name: "send",
  summary: "send a text message to a channel, a peer or a role",
  flags: {
    ...ROOT_FLAG,
    ...SPACE_FLAG,
    ...JSON_FLAG,
    channel: { type: "string", description: "post to this channel" },
    to: {
      type: "string",
      value: "owner.actor",
      description: "DM this peer (it must have a live agent: a DM to no one is not kept)",
    },
    role: {
      type: "string",
      description: "hand a task to this role (anycast; some agent must have been given it)",
    },
    as: { type: "string", default: "operator", description: "the actor to send as" },
  },
  positionals: [{ name: "text", description: "the message", required: true, variadic: true }],
  async run({ values, positionals }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    const as = localActor(values.as);
    // An actor, not a principal: the owner is local (newcomer pass 11 was told to pass both).
    if (!/^[A-Za-z0-9_]{1,64}$/.test(as)) {
      throw new CotalError(
        "usage",
        `--as takes an actor name of 1-64 characters of [A-Za-z0-9_] (the owner is local), not '${
          safeText(values.as.slice(0, 64))
        }'.`,
      );
    }
    // Newcomer pass 8: `--as` a live agent's name posted in its name without a word.
    if (as !== "operator" && await isLiveAgent(root, space, as)) {
      console.error(
        `note: sending as local.${safeText(as)}, a live agent of space '${space}': its receivers ` +
          `cannot tell this message from its own.`,
      );
    }
    const r = await sendText(
      root,
      space,
      { channel: values.channel, to: values.to, role: values.role },
      positionals.join(" "),
      as,
    );
    if (r.note && values.json !== true) console.error(safeText(r.note));
    printResult(
      denoIo(),
      { json: values.json === true },
      r,
      (v) => `sent ${v.id} (${v.stream} #${v.seq})`,
    );
  },
});

/** `cotal tail`: an observer's line stream of a space's channels. */
export const tailCommand = defineCommand({
  kind: "command",
  name: "tail",
  summary: "print a space's channel messages as they arrive (Ctrl-C stops)",
  flags: {
    ...ROOT_FLAG,
    ...SPACE_FLAG,
    ...JSON_FLAG,
    count: { type: "string", value: "n", description: "stop after n messages" },
  },
  async run({ values }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    const max = values.count === undefined ? undefined : Number(values.count);
    if (max !== undefined && (!Number.isInteger(max) || max < 1)) {
      throw new CotalError(
        "usage",
        `--count must be a whole number above 0, not '${values.count}'.`,
      );
    }
    const ac = new AbortController();
    const stop = () => ac.abort();
    Deno.addSignalListener("SIGINT", stop);
    try {
      await tail(root, space, (l) => {
        if (values.json) console.log(JSON.stringify(l));
        else {
          console.log(
            `${new Date(l.ts).toISOString()} #${safeText(l.channel)} ${safeText(l.from)}: ${
              safeText(l.text)
            }`,
          );
        }
      }, {
        signal: ac.signal,
        max,
        ready: () => console.error(`tailing space '${space}'`),
        // Said on stderr: posts sent while the connection was down are not shown (join replays).
        gap: (what, why) =>
          console.error(
            what === "lost"
              ? `the broker connection ended (${safeText(why ?? "closed")}); dialling again`
              : "tailing again (posts sent meanwhile are not shown; 'cotal join' replays history)",
          ),
      });
    } finally {
      Deno.removeSignalListener("SIGINT", stop);
    }
  },
});

registry.register([sendCommand, tailCommand]);

function userName(): string {
  // Read at run time, never at import: a CLI row without USER must still load this module.
  try {
    const u = Deno.env.get("USER");
    if (u && /^[A-Za-z0-9_]{1,64}$/.test(u)) return u;
  } catch {
    // Not granted: fall back.
  }
  return "operator";
}

/** `cotal join`: join a space interactively as yourself. */
export const joinCommand = defineCommand({
  kind: "command",
  name: "join",
  summary: "join a space interactively as local.<actor> (lines post; /help lists commands)",
  flags: {
    ...ROOT_FLAG,
    ...SPACE_FLAG,
    as: { type: "string", description: "your actor name (default: $USER, else 'operator')" },
    channel: {
      type: "string",
      multiple: true,
      default: ["general"],
      description: "a channel to join and post to (the first is current)",
    },
  },
  async run({ values }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    const lines = Deno.stdin.readable.pipeThrough(new TextDecoderStream()).pipeThrough(
      new TextLineStream(),
    );
    await join({
      root,
      space,
      actor: localActor(values.as ?? userName()),
      channels: [...values.channel],
      lines,
      // Every line a peer's text reaches: control characters shown, never run.
      print: (l: string) => console.log(safeText(l, { lines: true })),
    });
  },
});

registry.register([joinCommand]);
