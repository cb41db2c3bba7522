/**
 * cotal-delivery: the durable backstop for one space: fan-out writer and trusted reader.
 * @module
 */
import { parseArgs } from "node:util";

const USAGE = `usage: cotal-delivery --space <name> --server <url> [--help]

the durable backstop for one space: fan-out writer and trusted reader.`;

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
  console.error(`cotal-delivery: ${(err as Error).message}\n${USAGE}`);
  Deno.exit(2);
}
console.error(`cotal-delivery: not available in this build yet.\n${USAGE}`);
Deno.exit(2);
