/**
 * Run before the suite (`deno task test`): finds nats-server and bwrap or installs them into the
 * project cache, printing progress, so no test pays an install inside its timeout and parallel
 * test files never install the same tool at once.
 */
import { ensureServer } from "../../lib/broker/mod.ts";
import { ensureBwrap } from "../../lib/manager/sandbox/bwrap.ts";

const found = await ensureServer({ onProgress: (line) => console.error(`nats-server: ${line}`) });
console.error(`nats-server: using ${found.version.text} at ${found.path} (${found.source})`);
const bwrap = await ensureBwrap({ onProgress: (line) => console.error(`bwrap: ${line}`) });
console.error(`bwrap: using ${bwrap.path} (${bwrap.source})`);
const { ensureJudge, JUDGES } = await import("./harness_judges.ts");
for (const name of Object.keys(JUDGES) as (keyof typeof JUDGES)[]) {
  console.error(`${name}: ${await ensureJudge(name)}`);
}
