/**
 * A component that runs but does not answer (frozen with SIGSTOP, as a wedged process looks from
 * outside) is not healthy, and `down` still ends: fault pass 7 saw `status` call a frozen broker
 * or daemon healthy ("running", exit 0) and `down` over a frozen broker run past two minutes.
 */
import assert from "node:assert/strict";
import { readPidFile } from "../../lib/mesh/pidfile.ts";
import { componentFiles, listComponents } from "../../lib/mesh/stack.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

/** One CLI run, ended by the test's own deadline if it hangs. */
async function cotal(args: string[], deadlineMs = 150_000) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(deadlineMs),
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

async function pidOf(root: string, id: string): Promise<number> {
  return (await readPidFile(componentFiles(root, id).pidFile))!.pid;
}

function signal(pid: number, sig: Deno.Signal) {
  try {
    Deno.kill(pid, sig);
  } catch {
    // Already gone.
  }
}

Deno.test("mesh - a frozen daemon or broker is not healthy, and down over a frozen broker ends with nothing left", async () => {
  const root = await tempDir("cotal-hung-");
  const port = freePort();
  const delivery = `delivery.${spaceKeyHex("default")}`;
  const frozen: number[] = [];
  try {
    const up = await cotal(["up", "--detach", "--root", root, "--port", `${port}`]);
    assert.equal(up.code, 0, up.stderr);

    // A frozen delivery daemon: running, not answering.
    const d = await pidOf(root, delivery);
    signal(d, "SIGSTOP");
    frozen.push(d);
    const one = await cotal(["status", "--root", root, "--json"]);
    const s1 = JSON.parse(one.stdout);
    assert.equal(s1.healthy, false, one.stdout);
    assert.match(s1.unanswered[delivery], /did not answer/);
    const text = await cotal(["status", "--root", root]);
    assert.notEqual(text.code, 0);
    assert.match(text.stdout, /delivery\.default +running \(pid \d+\) but not answering/);
    signal(d, "SIGCONT");

    // A frozen broker: not healthy, said at once, the daemons left unasked.
    const b = await pidOf(root, "nats-server");
    signal(b, "SIGSTOP");
    frozen.push(b);
    const two = await cotal(["status", "--root", root, "--json"]);
    const s2 = JSON.parse(two.stdout);
    assert.equal(s2.healthy, false, two.stdout);
    assert.match(s2.unanswered["nats-server"], /no answer/);
    assert.equal(s2.unanswered[delivery], undefined);

    // down over it ends within the test's deadline, and stops everything.
    const down = await cotal(["down", "--root", root]);
    assert.equal(down.code, 0, down.stderr + down.stdout);
    assert.match(down.stdout, /nats-server: (stopped|killed)/);
    const left = (await listComponents(root)).filter((c) => c.state === "running");
    assert.deepEqual(left.map((c) => c.id), []);
    // And the next up works without a hand.
    const again = await cotal(["up", "--detach", "--root", root, "--port", `${port}`]);
    assert.equal(again.code, 0, again.stderr);
  } finally {
    for (const pid of frozen) signal(pid, "SIGCONT");
    await cotal(["down", "--root", root]).catch(() => {});
    await removeTempDir(root);
  }
});
