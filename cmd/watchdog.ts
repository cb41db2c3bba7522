/**
 * cotal-watchdog: restarts the broker and any daemon of a detached stack that dies, with
 * backoff. A thin composition root: parse the flags, run the loop until SIGINT or SIGTERM.
 * @module
 */
import { type CommandSpec, helpRequested, helpText, parseCommandArgs } from "../lib/cli/mod.ts";
import { isCotalError } from "../lib/errors.ts";
import { startHeartbeat } from "../lib/heartbeat.ts";
import { Watchdog } from "../lib/mesh/watchdog.ts";

const command: CommandSpec = {
  name: "watchdog",
  summary: "restarts the broker and any daemon of a detached stack that dies",
  flags: {
    root: {
      type: "string",
      required: true,
      value: "dir",
      description: "the state directory whose stack it watches",
    },
    self: {
      type: "string",
      default: "watchdog",
      value: "id",
      description: "its own id on the watch list (the other watchdog watches it)",
    },
  },
};

const PROGRAM = "cotal-watchdog";

async function main(argv: string[]): Promise<number> {
  if (helpRequested(command, argv)) {
    console.log(helpText(command, PROGRAM).replaceAll(`${PROGRAM} watchdog`, PROGRAM));
    return 0;
  }
  let root: string;
  let self: string;
  try {
    const { values } = parseCommandArgs(command, argv, { program: PROGRAM });
    root = String(values.root);
    self = String(values.self);
  } catch (err) {
    console.error(`${PROGRAM}: ${isCotalError(err) ? `${err.message} [${err.code}]` : err}`);
    return 2;
  }
  // Beats while its event loop turns: the stack's watchdog restarts it when the beat stops.
  startHeartbeat();
  const stop = new AbortController();
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => stop.abort());
  }
  const log = (line: string) => console.error(`${new Date().toISOString()} ${line}`);
  log(`watchdog up for ${root}`);
  await new Watchdog({ root, detach: true, log, self }).run(stop.signal);
  log("watchdog stopped");
  return 0;
}

Deno.exit(await main(Deno.args));
