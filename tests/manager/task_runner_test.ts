import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  parseTaskRunnerConfig,
  resultText,
  runTaskCommand,
  TASK_RUNNER_LIMITS,
} from "../../lib/manager/agents/task_runner.ts";

Deno.test("manager - task runner: the task's text goes to stdin, output and exit code come back", async () => {
  const r = await runTaskCommand({
    command: "/bin/sh",
    args: ["-c", "tr a-z A-Z; echo oops >&2; exit 3"],
    input: "build the thing\n",
  });
  assert.deepEqual(r, {
    code: 3,
    signal: null,
    stdout: "BUILD THE THING\n",
    stderr: "oops\n",
    truncated: false,
    timedOut: false,
    aborted: false,
  });
});

Deno.test("manager - task runner: output past the limit is cut and the command still finishes", async () => {
  const r = await runTaskCommand({
    command: "/bin/sh",
    // 200 KB on each stream: a command that blocked on a full pipe would never exit.
    args: ["-c", "head -c 200000 /dev/zero | tr '\\0' a; head -c 200000 /dev/zero >&2; echo end"],
    maxOutputBytes: 1000,
  });
  assert.equal(r.code, 0);
  assert.equal(r.stdout, "a".repeat(1000));
  assert.equal(r.stderr.length, 1000);
  assert.equal(r.truncated, true);
});

Deno.test("manager - task runner: a command past its timeout is stopped and says so", async () => {
  const r = await runTaskCommand({ command: "/bin/sleep", args: ["600"], timeoutMs: 50 });
  assert.equal(r.timedOut, true);
  assert.equal(r.signal, "SIGTERM");
  assert.equal(r.code, null);
});

Deno.test("manager - task runner: a stop request ends the command", async () => {
  const ctl = new AbortController();
  const running = runTaskCommand({ command: "/bin/sleep", args: ["600"] }, { signal: ctl.signal });
  ctl.abort();
  const r = await running;
  assert.equal(r.aborted, true);
  assert.equal(r.timedOut, false);
  assert.equal(r.signal, "SIGTERM");
});

Deno.test("manager - task runner: a grandchild holding the pipe does not hang the result", async () => {
  const r = await runTaskCommand({
    command: "/bin/sh",
    args: ["-c", "sleep 600 & echo pid:$!"],
  });
  const pid = Number(/pid:(\d+)/.exec(r.stdout)?.[1]);
  try {
    assert.equal(r.code, 0);
    assert.ok(pid > 0);
  } finally {
    if (pid > 0) Deno.kill(pid, "SIGKILL");
  }
});

Deno.test("manager - task runner: limits and configuration are refused outside the caps", async () => {
  for (const timeoutMs of [0, -1, 1.5, TASK_RUNNER_LIMITS.maxTimeoutMs + 1]) {
    await assert.rejects(
      runTaskCommand({ command: "/bin/true", timeoutMs }),
      (e) => isCotalError(e, "task_bad_limit") && /timeoutMs/.test(e.message),
    );
  }
  await assert.rejects(
    runTaskCommand({ command: "/bin/true", maxOutputBytes: TASK_RUNNER_LIMITS.maxOutputBytes + 1 }),
    (e) => isCotalError(e, "task_bad_limit"),
  );
  await assert.rejects(
    runTaskCommand({ command: "/nonexistent/cmd" }),
    (e) => isCotalError(e, "task_spawn_failed"),
  );
  assert.throws(() => parseTaskRunnerConfig(undefined), (e) => isCotalError(e, "task_no_program"));
  assert.throws(
    () => parseTaskRunnerConfig("make", { shell: true }),
    (e) => isCotalError(e, "task_bad_config") && e.message.includes('"shell"'),
  );
  assert.throws(
    () => parseTaskRunnerConfig("make", { args: [1] }),
    (e) => isCotalError(e, "task_bad_config"),
  );
  assert.deepEqual(parseTaskRunnerConfig("make", { args: ["test"], timeoutMs: 5000 }), {
    command: "make",
    args: ["test"],
    timeoutMs: 5000,
    maxOutputBytes: TASK_RUNNER_LIMITS.defaultOutputBytes,
  });
});

Deno.test("task runner - an answer with no output says how the command ended and what it said on stderr (newcomer pass 10)", async () => {
  const r = await runTaskCommand({
    command: "/bin/sh",
    args: ["-c", "cat >/dev/null; echo oops >&2; exit 3"],
    cwd: "/tmp",
    input: "x",
  });
  assert.equal(resultText(r), "(exit 3, no output; stderr: oops)");
  assert.equal(resultText({ ...r, stderr: "" }), "(exit 3, no output)");
  assert.equal(resultText({ ...r, stdout: "done\n" }), "done\n");
});
