/**
 * Run before the suite (`deno task test`): finds nats-server or installs it into the project
 * cache, printing progress, so the first test does not pay the install inside its timeout.
 */
import { ensureServer } from "../../lib/broker/mod.ts";

const found = await ensureServer({ onProgress: (line) => console.error(`nats-server: ${line}`) });
console.error(`nats-server: using ${found.version.text} at ${found.path} (${found.source})`);
