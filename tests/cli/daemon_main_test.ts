/**
 * The daemons' shared main (lib/cli/daemon_main.ts): each case runs a real process whose daemon
 * is a stand-in, and is judged by its exit code and stderr.
 */
import assert from "node:assert/strict";

const MAIN = new URL("../../lib/cli/daemon_main.ts", import.meta.url).href;
const ERRORS = new URL("../../lib/errors.ts", import.meta.url).href;

/** A program whose `start` is `startBody` (it may use `args`, `CotalError` and `mark`). */
function program(startBody: string, extra = ""): string {
  return `
import { daemonMain } from "${MAIN}";
import { CotalError } from "${ERRORS}";
const mark = (s) => console.log(s);
Deno.exit(await daemonMain({
  program: "cotal-test",
  command: { name: "test", summary: "a stand-in daemon", flags: {
    mode: { type: "string", description: "what to do" } } },
  async start(args) { ${startBody} },
  ${extra}
}, Deno.args));
`;
}

async function run(
  source: string,
  args: string[] = [],
  signalAfterLine?: string,
): Promise<{ code: number; stdout: string; stderr: string; beat: boolean }> {
  const dir = await Deno.makeTempDir({ prefix: "cotal-daemon-main-" });
  try {
    const file = `${dir}/daemon.ts`;
    await Deno.writeTextFile(file, source);
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-check", file, ...args],
      stdout: "piped",
      stderr: "piped",
      env: { COTAL_HEARTBEAT: `${dir}/beat` },
    }).spawn();
    const out = child.stdout.pipeThrough(new TextDecoderStream());
    let stdout = "";
    const stderr = new Response(child.stderr).text();
    // Deadline: a main that never ends fails the test instead of hanging it.
    const kill = setTimeout(() => child.kill("SIGKILL"), 30_000);
    try {
      for await (const chunk of out) {
        stdout += chunk;
        if (signalAfterLine && stdout.includes(signalAfterLine)) {
          signalAfterLine = undefined;
          child.kill("SIGTERM");
        }
      }
      const st = await child.status;
      const beat = await Deno.stat(`${dir}/beat`).then(() => true, () => false);
      return { code: st.code, stdout, stderr: await stderr, beat };
    } finally {
      clearTimeout(kill);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("daemon main - SIGTERM stops a running daemon and exits 0", async () => {
  const r = await run(
    program(`mark("up"); return { stop: async () => mark("stopped") };`),
    [],
    "up",
  );
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /up\nstopped\n/);
  // The heartbeat the watchdog reads was started.
  assert.equal(r.beat, true);
});

Deno.test("daemon main - a SIGTERM during start-up stops the daemon once it has started", async () => {
  const r = await run(
    program(
      `mark("starting"); await new Promise((r) => setTimeout(r, 1500)); mark("up");
       return { stop: async () => mark("stopped") };`,
    ),
    [],
    "starting",
  );
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /starting\nup\nstopped\n/);
});

Deno.test("daemon main - a usage error exits 2 with its sentence and code", async () => {
  const r = await run(program(`return { stop: async () => {} };`), ["--nope"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^cotal-test: Unknown flag --nope .*\[usage\]\n$/);
});

Deno.test("daemon main - another refusal exits 1, or 2 when the daemon names it a refusal of its inputs", async () => {
  const start = `throw new CotalError("state_missing", "The state is missing; provision it.");`;
  const plain = await run(program(start));
  assert.equal(plain.code, 1);
  assert.equal(plain.stderr, "cotal-test: The state is missing; provision it. [state_missing]\n");
  const input = await run(program(start, `refusesInput: (e) => e.code === "state_missing",`));
  assert.equal(input.code, 2);
});

Deno.test("daemon main - a daemon that ends by itself exits with its own code; a failure with 1", async () => {
  const ends = await run(program(`return { stop: async () => {}, ended: Promise.resolve(3) };`));
  assert.equal(ends.code, 3);
  const fails = await run(
    program(`return { stop: async () => {}, ended: Promise.reject(new Error("broke")) };`),
  );
  assert.equal(fails.code, 1);
  assert.match(fails.stderr, /^cotal-test: failed: Error: broke/);
});
