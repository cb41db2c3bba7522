/**
 * cotal: the operator CLI.
 * @module
 */
import { parseArgs } from "node:util";
import { isCotalError } from "../lib/errors.ts";
import { up } from "../lib/mesh/up.ts";

const USAGE = `usage: cotal <command> [flags]

commands:
  up    bring up the broker for a space in the foreground (Ctrl-C stops it)`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  if (command !== "up") {
    console.error(`cotal: unknown command '${command}'; run 'cotal --help' for the list.`);
    return 2;
  }
  let values;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        root: { type: "string" },
        space: { type: "string", default: "default" },
        host: { type: "string", default: "127.0.0.1" },
        port: { type: "string", default: "4222" },
      },
      strict: true,
    }));
  } catch (err) {
    console.error(`cotal up: ${(err as Error).message}; run 'cotal --help'.`);
    return 2;
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    console.error(`cotal up: --port must be a whole number from 1 to 65535, not '${values.port}'.`);
    return 2;
  }
  const stop = Promise.withResolvers<void>();
  for (const sig of ["SIGINT", "SIGTERM"] as const) Deno.addSignalListener(sig, stop.resolve);
  try {
    await up({
      root: values.root ?? `${Deno.cwd()}/.cotal`,
      space: values.space!,
      host: values.host!,
      port,
      say: (l) => console.log(l),
      untilStopped: stop.promise,
    });
    return 0;
  } catch (err) {
    console.error(`cotal up: ${isCotalError(err) ? err.message : String(err)}`);
    return 1;
  }
}

Deno.exit(await main(Deno.args));
