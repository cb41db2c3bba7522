import assert from "node:assert/strict";
import { bufferIo, createProgress, liveLine, printError, printResult } from "../../lib/cli/mod.ts";
import { CotalError } from "../../lib/errors.ts";

function clock(...times: number[]): () => number {
  return () => times.shift() ?? 0;
}

Deno.test("cli - printResult: human text vs JSON", () => {
  const human = bufferIo();
  printResult(human, { json: false }, { n: 2 }, (v) => `n is ${v.n}`);
  printResult(human, { json: false }, "plain");
  assert.equal(human.out, "n is 2\nplain\n");
  const json = bufferIo();
  printResult(json, { json: true }, { n: 2 }, (v) => `n is ${v.n}`);
  assert.deepEqual(JSON.parse(json.out), { n: 2 });
});

Deno.test("cli - printError: stderr sentence vs JSON error document", () => {
  const err = new CotalError("broker_not_ready", "The broker is not answering; run cotal up.");
  const human = bufferIo();
  printError(human, { json: false }, err);
  assert.equal(human.err, "cotal: The broker is not answering; run cotal up.\n");
  assert.equal(human.out, "");
  const json = bufferIo();
  printError(json, { json: true }, err);
  assert.deepEqual(JSON.parse(json.out), {
    error: { code: "broker_not_ready", message: "The broker is not answering; run cotal up." },
  });
});

Deno.test("cli - progress off a terminal: one line per step, updates silent", async () => {
  const io = bufferIo({ stderrIsTerminal: false });
  const progress = createProgress(io, { now: clock(0, 1500, 2000, 2040) });
  const value = await progress.step("start broker", (update) => {
    update("waiting for port");
    return Promise.resolve(42);
  });
  assert.equal(value, 42);
  await assert.rejects(
    progress.step(
      "provision space",
      () =>
        Promise.reject(new CotalError("stream_config_conflict", "The stream exists; remove it.")),
    ),
    (e) => e instanceof CotalError,
  );
  assert.equal(
    io.err,
    "ok   start broker (1.5s)\nfail provision space: The stream exists; remove it.\n",
  );
  assert.equal(io.out, "");
});

Deno.test("cli - progress on a terminal: a live line rewritten in place", async () => {
  const io = bufferIo({ stderrIsTerminal: true });
  const progress = createProgress(io, { now: clock(0, 250) });
  await progress.step("start broker", (update) => {
    update("waiting for port");
    return Promise.resolve();
  });
  assert.equal(
    io.err,
    "... start broker\r\x1b[2K... start broker: waiting for port\r\x1b[2Kok   start broker (250ms)\n",
  );
});

Deno.test("cli - a live line is shown in place on a terminal, and nowhere else (pipes, logs, --json)", () => {
  const tty = bufferIo({ stderrIsTerminal: true });
  const line = liveLine(tty);
  line("snapshot of CHAT_x (1/9)");
  line("snapshot of CHAT_x (1/9): 1.0 MiB");
  line.done();
  assert.equal(
    tty.err,
    "\r\x1b[2K... snapshot of CHAT_x (1/9)\r\x1b[2K... snapshot of CHAT_x (1/9): 1.0 MiB\r\x1b[2K",
  );
  assert.equal(tty.out, "");
  for (
    const [io, json] of [[bufferIo(), false], [bufferIo({ stderrIsTerminal: true }), true]] as const
  ) {
    const quiet = liveLine(io, { json });
    quiet("anything");
    quiet.done();
    assert.equal(io.err + io.out, "");
  }
});
