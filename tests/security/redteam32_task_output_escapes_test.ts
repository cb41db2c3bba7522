/**
 * Red team 32, terminal injection through a task runner's output, end to end under a root
 * supervisor: the agent's program writes OSC 0 (window title), OSC 52 (clipboard write), CSI
 * (screen clear, colours) and a UTF-8 C1 CSI (U+009B) on stdout and stderr, then exits 3. The
 * operator sends it a task from `cotal join`, then runs `cotal ps` and `cotal logs` for the
 * supervisor. No byte of ESC, BEL or C1 may reach the operator's terminal from any of them.
 *
 * Observed 2026-12-05 (root, bwrap): refused; join shows `\x1b]52;...\x07` as text, ps and
 * logs carry no control byte.
 */
import assert from "node:assert/strict";
import { tempDir } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;
const PORT = 47000 + Math.floor(Math.random() * 900);

async function cotal(root: string, args: string[], stdin?: string) {
  const end = args.indexOf("--");
  const withRoot = end < 0
    ? [...args, "--root", root]
    : [...args.slice(0, end), "--root", root, ...args.slice(end)];
  const p = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...withRoot],
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(120_000),
  }).spawn();
  if (stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await p.output();
  const d = new TextDecoder();
  return { code: out.code, all: d.decode(out.stdout) + d.decode(out.stderr) };
}

// ESC, BEL, CSI in C1 (raw and as UTF-8 U+009B), OSC in C1.
// deno-lint-ignore no-control-regex
const CONTROL = /[\x07\x1b\x9b\x9d\u009b]/;

Deno.test("red team 32 - a task runner's escape sequences never reach the operator's terminal (join, ps, logs)", async () => {
  const root = await tempDir("cotal-rt32esc-");
  try {
    const up = await cotal(root, ["up", "--port", String(PORT), "--detach"]);
    assert.equal(up.code, 0, up.all);
    const script = 'printf "\\033]0;PWNED\\007\\033[2Jhello\\033[31mRED\\302\\2331mC1\\n" >&2; ' +
      'printf "\\033]52;c;cHduZWQ=\\007out\\302\\2352;t\\007\\n"; exit 3';
    const sp = await cotal(root, ["spawn", "--role", "esc", "--", "/bin/sh", "-c", script]);
    assert.equal(sp.code, 0, sp.all);
    const join = await cotal(root, ["join", "--as", "opx"], "/task esc hi\n");
    console.log(join.all);
    assert.match(join.all, /local\.esc_1/);
    assert.match(join.all, /\\x1b\]52/, "the sequence is shown as text");
    const ps = await cotal(root, ["ps"]);
    const logs = await cotal(root, ["logs", "supervise.default", "--lines", "200"]);
    for (
      const [what, text] of [["join", join.all], ["spawn", sp.all], ["ps", ps.all], [
        "logs",
        logs.all,
      ]]
    ) {
      assert.ok(!CONTROL.test(text), `${what} passed a control byte: ${JSON.stringify(text)}`);
    }
  } finally {
    await cotal(root, ["down"]);
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
