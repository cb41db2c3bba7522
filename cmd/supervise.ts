/**
 * cotal-supervise: the agent lifecycle (spawn, despawn, attach) for one space on this machine.
 * @module
 */
import { parseArgs } from "node:util";

const USAGE = `usage: cotal-supervise --space <name> --server <url> [--help]

the agent lifecycle (spawn, despawn, attach) for one space on this machine.`;

try {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      space: { type: "string" },
      server: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    Deno.exit(0);
  }
} catch (err) {
  console.error(`cotal-supervise: ${(err as Error).message}\n${USAGE}`);
  Deno.exit(2);
}
console.error(`cotal-supervise: not available in this build yet.\n${USAGE}`);
Deno.exit(2);
