/**
 * cotal-watchdog: restarts the broker and any daemon of a detached stack that dies, with
 * backoff. A thin composition root: the loop under the shared daemon main (lib/cli/daemon_main.ts)
 * until SIGINT or SIGTERM.
 * @module
 */
import type { CommandSpec } from "../lib/cli/mod.ts";
import { daemonMain } from "../lib/cli/mod.ts";
import { Watchdog } from "../lib/mesh/mod.ts";

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

Deno.exit(
  await daemonMain({
    program: "cotal-watchdog",
    command,
    start({ values }) {
      const root = String(values.root);
      const stop = new AbortController();
      const log = (line: string) => console.error(`${new Date().toISOString()} ${line}`);
      log(`watchdog up for ${root}`);
      const watching = new Watchdog({ root, detach: true, log, self: String(values.self) })
        .run(stop.signal).then(() => log("watchdog stopped"));
      return Promise.resolve({
        stop() {
          stop.abort();
          return watching;
        },
      });
    },
  }, Deno.args),
);
