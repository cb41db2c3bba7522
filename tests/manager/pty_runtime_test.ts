import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { registry, type RuntimeHandle } from "../../lib/registry.ts";
import { createRuntime, processRuntime, ptyRuntime } from "../../lib/manager/pty_runtime.ts";
import { waitFor } from "../_harness/broker.ts";

const ENV = { PATH: "/usr/bin:/bin", TERM: "xterm-256color" };

function output(handle: RuntimeHandle): { text(): string } {
  const dec = new TextDecoder();
  let text = "";
  handle.onData((d) => (text += dec.decode(d, { stream: true })));
  return { text: () => text };
}

function exited(handle: RuntimeHandle) {
  return new Promise<{ code: number | null; signal: string | null }>((r) => handle.onExit(r));
}

Deno.test("manager - the pty runtime self-registers and resolves through the registry", async () => {
  assert.equal(registry.resolve("runtime", "pty"), ptyRuntime);
  assert.equal(await createRuntime(), ptyRuntime);
  assert.equal(await createRuntime("process"), processRuntime);
  await assert.rejects(
    createRuntime("tmux"),
    (e) => isCotalError(e, "registry_unknown") && e.message.includes("runtime:tmux"),
  );
});

Deno.test("manager - pty: a real terminal, input round trip, resize honoured, exit code", async () => {
  const runtime = await createRuntime("pty");
  const h = await runtime.spawn({
    command: "/bin/sh",
    args: ["-c", "tty; stty size; read line; echo got:$line; stty size; exit 3"],
    env: ENV,
    cwd: "/",
  }, { cols: 91, rows: 17 });
  assert.ok(h.pid > 0);
  const out = output(h);
  const done = exited(h);
  await waitFor(() => /17 91/.test(out.text()), { what: "the first stty size" });
  assert.match(out.text(), /\/dev\/pts\/\d+/);
  h.resize(133, 41);
  h.write("hello\r");
  assert.deepEqual(await done, { code: 3, signal: null });
  assert.match(out.text(), /got:hello/);
  assert.match(out.text(), /41 133/);
});

Deno.test("manager - pty: the child's env is exactly the spec's, and kill reports the signal", async () => {
  Deno.env.set("COTAL_TEST_SUPERVISOR_ONLY", "leak");
  try {
    const h = await ptyRuntime.spawn({ command: "/usr/bin/env", args: [], env: { ONLY: "this" } });
    const out = output(h);
    await exited(h);
    assert.match(out.text(), /ONLY=this/);
    assert.ok(!out.text().includes("leak"));
    assert.ok(!/^PATH=/m.test(out.text()));
  } finally {
    Deno.env.delete("COTAL_TEST_SUPERVISOR_ONLY");
  }
  const s = await ptyRuntime.spawn({ command: "/bin/sleep", args: ["600"], env: ENV });
  const done = exited(s);
  s.kill("SIGTERM");
  assert.deepEqual(await done, { code: null, signal: "SIGTERM" });
  // A listener added after the exit still hears it.
  assert.deepEqual(await exited(s), { code: null, signal: "SIGTERM" });
});

Deno.test("manager - process runtime: pipes, stdin round trip, cleared env, exit code", async () => {
  Deno.env.set("COTAL_TEST_SUPERVISOR_ONLY", "leak");
  try {
    const h = await processRuntime.spawn({
      command: "/bin/sh",
      args: ["-c", "read line; echo got:$line; env; exit 4"],
      env: ENV,
    });
    const out = output(h);
    const done = exited(h);
    h.write("over pipes\n");
    assert.deepEqual(await done, { code: 4, signal: null });
    assert.match(out.text(), /got:over pipes/);
    assert.ok(!out.text().includes("leak"));
  } finally {
    Deno.env.delete("COTAL_TEST_SUPERVISOR_ONLY");
  }
  await assert.rejects(
    processRuntime.spawn({ command: "", args: [] }),
    (e) => isCotalError(e, "runtime_bad_spec"),
  );
});

async function runChild(flags: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      ...flags,
      `--config=${new URL("../../deno.json", import.meta.url).pathname}`,
      new URL("./_pty_child.ts", import.meta.url).pathname,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { ok: out.success, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("manager - pty under Deno needs --allow-ffi plus unscoped read and write", async () => {
  const ok = await runChild(["--allow-ffi", "--allow-read", "--allow-write"]);
  assert.ok(ok.ok, ok.stderr);
  assert.match(JSON.parse(ok.stdout).out, /\/dev\/pts\/\d+/);
  // node:tty.ReadStream on the pty's fd asks for read and write on everything; a scoped grant
  // is not enough, which is why the cotal-supervise row grants both unscoped.
  const scoped = await runChild(["--allow-ffi", "--allow-read=/tmp", "--allow-write=/tmp"]);
  assert.ok(!scoped.ok);
  assert.match(scoped.stderr, /Requires (read|write) access/);
});
