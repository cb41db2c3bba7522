/**
 * A daemon's heartbeat (lib/heartbeat.ts), run as a real process under the rows' flags: it
 * beats while the event loop turns, stops beating when the loop is stuck, never keeps the
 * process alive, and says once when it may not write.
 */
import assert from "node:assert/strict";
import { HEARTBEAT_INTERVAL_MS } from "../../lib/heartbeat.ts";

const HEARTBEAT = new URL("../../lib/heartbeat.ts", import.meta.url).href;

async function run(script: string, beat: string, flags: string[]) {
  const dir = await Deno.makeTempDir({ prefix: "cotal-beat-" });
  const file = `${dir}/probe.ts`;
  await Deno.writeTextFile(
    file,
    `import { startHeartbeat } from ${JSON.stringify(HEARTBEAT)};\n${script}`,
  );
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-prompt", `--allow-read=${dir}`, ...flags, file],
    env: { COTAL_HEARTBEAT: beat },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  return { dir, code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

Deno.test("heartbeat - beats while the loop turns, not while it is stuck, and never holds the process", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "cotal-beat-" });
  const beat = `${tmp}/d.beat`;
  try {
    // Two beats' worth of turning loop, then a synchronous spin as long: the file's time is
    // the last turn's. The script ends by itself (the timer is unref'd).
    const r = await run(
      `startHeartbeat();
await new Promise((r) => setTimeout(r, ${HEARTBEAT_INTERVAL_MS * 2 + 500}));
const spinFrom = Date.now();
while (Date.now() - spinFrom < ${HEARTBEAT_INTERVAL_MS * 3}) { /* stuck */ }
// Read before the loop turns again: the last beat written before or during the spin.
console.error("spun from " + spinFrom + " last " + Deno.readTextFileSync(${
        JSON.stringify(beat)
      }).trim());`,
      beat,
      [`--allow-write=${beat}`, `--allow-read=${beat}`, "--allow-env=COTAL_HEARTBEAT"],
    );
    assert.equal(r.code, 0, r.stderr);
    const [, from, at] = /spun from (\d+) last (\d+)/.exec(r.stderr)!;
    const spinFrom = Number(from);
    const last = Number(at);
    // It beat during the turning loop (more than once) and not during the spin.
    assert.ok(last <= spinFrom, `a beat at ${last} during the spin from ${spinFrom}`);
    assert.ok(
      spinFrom - last < HEARTBEAT_INTERVAL_MS + 1_000,
      `the last beat ${spinFrom - last} ms before`,
    );
    await Deno.remove(r.dir, { recursive: true });
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("heartbeat - a row without the file's grant is said once, and the process runs on", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "cotal-beat-" });
  try {
    const r = await run(
      `startHeartbeat();
await new Promise((r) => setTimeout(r, ${HEARTBEAT_INTERVAL_MS * 2 + 500}));
console.error("still running");`,
      `${tmp}/d.beat`,
      ["--allow-env=COTAL_HEARTBEAT"],
    );
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr.match(/heartbeat: cannot write/g)?.length, 1, r.stderr);
    assert.match(r.stderr, /still running/);
    await Deno.remove(r.dir, { recursive: true });
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});
