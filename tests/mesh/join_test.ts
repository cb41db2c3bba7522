import assert from "node:assert/strict";
import { bucketNames, connectBroker, listKeys, streamNames } from "../../lib/wire/mod.ts";
import { readMeshRecord } from "../../lib/mesh/stack.ts";
import { mintForRoot, sendText, tail } from "../../lib/mesh/ops.ts";
import { down, up } from "../../lib/mesh/up.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

Deno.test("mesh - join: an interactive member posts, receives a DM, and leaves no durables behind", async () => {
  const root = await tempDir("cotal-root-");
  const home = await tempDir("cotal-home-");
  try {
    const r = await up({
      root,
      space: "j",
      host: "127.0.0.1",
      port: freePort(),
      detach: true,
      say: () => {},
      untilStopped: Promise.resolve(),
    });
    const seen: string[] = [];
    const ac = new AbortController();
    const tailing = Promise.withResolvers<void>();
    const tailer = tail(root, "j", (l) => seen.push(`${l.from}:${l.text}`), {
      signal: ac.signal,
      ready: tailing.resolve,
    });
    await tailing.promise;

    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "join", "--root", root, "--space", "j", "--as", "alice"],
      env: { COTAL_HOME: home },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const out: string[] = [];
    const reading = (async () => {
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) out.push(chunk);
    })();
    const writer = child.stdin.getWriter();
    const enc = new TextEncoder();
    await waitFor(() => out.join("").includes("joined space 'j' as local.alice"), {
      what: "join to start",
    });
    await writer.write(enc.encode("hello from alice\n"));
    await waitFor(() => seen.includes("local.alice:hello from alice"), {
      what: "the post in tail",
    });

    const during = await connectBroker({
      servers: r.url,
      creds: await mintForRoot(root, "j", { profile: "admin" }),
    });
    const dmDuring = await (await during.jetstreamManager()).streams.info(streamNames("j").dm);
    assert.equal(dmDuring.state.consumer_count, 1, "the session has its own dm_ durable");
    await during.close();
    await writer.write(enc.encode("/dm local.alice note to self\n"));
    await waitFor(() => out.join("").includes("-> DM to local.alice sent"), {
      what: "the DM's acknowledgement",
    });
    await sendText(root, "j", { to: "local.alice" }, "psst");
    await waitFor(() => out.join("").includes("(dm) local.operator: psst"), { what: "the DM" });
    // A text of several lines reads as lines, each further one indented under the first, so
    // none passes for a message of its own; an escape in it is still shown, not acted on.
    await sendText(
      root,
      "j",
      { to: "local.alice" },
      "line one\n#general local.operator: forged\x1b[2J",
    );
    await waitFor(() => out.join("").includes("forged"), { what: "the multi-line DM" });
    assert.match(
      out.join(""),
      /^\(dm\) local\.operator: line one\n {4}#general local\.operator: forged\\x1b\[2J$/m,
    );
    // A channel this session may only read: joined, and typing still posts where it may.
    await writer.write(enc.encode("/join random\nstill general\n"));
    await waitFor(() => seen.includes("local.alice:still general"), { what: "the second post" });
    assert.match(out.join(""), /reading #random; your lines still go to #general/);
    assert.doesNotMatch(out.join(""), /Permissions Violation|^! /m);
    // As cotal send does: a DM or a task nobody would read is refused with a sentence.
    await writer.write(enc.encode("/dm local.ghost hi\n/dm scripted hi\n/task nobody x\n"));
    await waitFor(
      () => /No agent in space 'j' was ever given the role 'nobody'/.test(out.join("")),
      {
        what: "the refusals",
      },
    );
    assert.match(out.join(""), /! local\.ghost has no live agent in space 'j'/);
    // A bare name is answered in the session's own words (newcomer pass 10 was told --to).
    assert.match(out.join(""), /is local\.scripted \(\/dm local\.scripted <text>\)/);
    // Leaving the channel lines go to says where they go now: nowhere (newcomer pass 8: they
    // still went to #general, unsaid), and a line typed then is refused, not posted.
    await writer.write(enc.encode("/leave random\n/leave general\nafter leave\n/leave general\n"));
    await waitFor(() => out.join("").includes("you were not reading #general"), {
      what: "the leaves",
    });
    assert.match(out.join(""), /^left #random$/m);
    assert.match(out.join(""), /left #general; your lines go nowhere until you \/join/);
    assert.match(out.join(""), /! no channel to post to/);
    await writer.write(enc.encode("/nonsense\n/quit\n"));
    await writer.close();
    assert.equal((await child.status).code, 0);
    await reading;
    assert.match(out.join(""), /\? unknown or incomplete command '\/nonsense'/);
    assert.ok(!seen.includes("local.alice:after leave"), "posted after leaving");

    // The session's bind-only durables are gone: the DM stream is back to no consumers.
    const obs = await connectBroker({
      servers: r.url,
      creds: await mintForRoot(root, "j", { profile: "admin" }),
    });
    const dm = await (await obs.jetstreamManager()).streams.info(streamNames("j").dm);
    assert.equal(dm.state.consumer_count, 0);
    await obs.close();
    // A DM to the member who left is refused, as to one who never joined: its ACL row is a
    // purge marker now, and the stream would acknowledge the DM and keep it for nobody.
    const after = await sendText(root, "j", { to: "local.alice" }, "are you there").then(
      () => undefined,
      (err: Error) => err,
    );
    assert.match(String(after?.message), /local\.alice has no live agent in space 'j'/);
    ac.abort();
    await tailer;
  } finally {
    await down(root);
    await removeTempDir(root);
    await removeTempDir(home);
  }
});

Deno.test("mesh - join: at the end of its input a session waits for the replies of the tasks it sent (and an up over the running stack says it keeps its isolation)", async () => {
  const root = await tempDir("cotal-root-");
  const home = await tempDir("cotal-home-");
  try {
    const port = freePort();
    await up({
      root,
      space: "jw",
      host: "127.0.0.1",
      port,
      detach: true,
      say: () => {},
      untilStopped: Promise.resolve(),
    });
    // Another isolation on the running stack is said not to apply until a down.
    const said: string[] = [];
    await up({
      root,
      space: "jw",
      host: "127.0.0.1",
      port,
      detach: true,
      isolation: "deno-only",
      say: (l) => said.push(l),
      untilStopped: Promise.resolve(),
    });
    assert.ok(
      said.some((l) =>
        /the running stack keeps isolation bwrap; --isolation deno-only takes effect after '.*down --root \S+ --keep-agents' and '.*up --root \S+ --isolation deno-only --detach'/
          .test(l)
      ),
      said.join("\n"),
    );
    const cotal = (args: string[], stdin?: string) => {
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", COTAL, args[0], "--root", root, "--space", "jw", ...args.slice(1)],
        env: { COTAL_HOME: home },
        stdin: stdin === undefined ? "null" : "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      if (stdin !== undefined) {
        const w = child.stdin.getWriter();
        w.write(new TextEncoder().encode(stdin)).then(() => w.close());
      }
      return child.output().then((o) => ({
        code: o.code,
        out: new TextDecoder().decode(o.stdout) + new TextDecoder().decode(o.stderr),
      }));
    };
    // A role that answers only after a few seconds.
    const spawned = await cotal([
      "spawn",
      "--role",
      "slow",
      "--",
      "/bin/sh",
      "-c",
      "sleep 4; tr a-z A-Z",
    ]);
    assert.equal(spawned.code, 0, spawned.out);
    // The input ends right after the task: the session still prints its answer.
    const r = await cotal(["join", "--as", "asker"], "/task slow hello\n");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /waiting up to 30 s for 1 task reply/);
    // A task and a DM say they went (newcomer pass 7 could not tell).
    assert.match(r.out, /^-> task to role slow sent; its reply shows here$/m);
    assert.match(r.out, /^\(dm\) local\.slow_1: HELLO/m, r.out);
    // The session says it joined before anything it saw while joining; a data part shows its
    // JSON, and the supervisor's presence row says what it is.
    assert.match(r.out, /^joined space /, r.out);
    assert.doesNotMatch(r.out, /\[data\]/, r.out);
    assert.match(r.out, /^\(dm\) local\.slow_1: HELLO \[data \{"task":.*(\}|\.\.\.)\]$/m, r.out);
    assert.match(
      r.out,
      // One pair of parentheses (newcomer pass 11 read nested ones).
      /^\* local\.manager_\w+ is online \(manager, the space's supervisor, which starts and stops agents\)$/m,
      r.out,
    );
    // With /quit the session ends at once, not waiting.
    const q = await cotal(["join", "--as", "quitter"], "/task slow again\n/quit\n");
    assert.equal(q.code, 0, q.out);
    assert.doesNotMatch(q.out, /waiting up to/);
  } finally {
    await down(root);
    await removeTempDir(root);
    await removeTempDir(home);
  }
});

Deno.test("mesh - join: a session killed without its cleanup is taken over by the next join of its name, with the DMs sent to it since", async () => {
  const root = await tempDir("cotal-root-");
  const home = await tempDir("cotal-home-");
  try {
    await up({
      root,
      space: "jk",
      host: "127.0.0.1",
      port: freePort(),
      detach: true,
      say: () => {},
      untilStopped: Promise.resolve(),
    });
    const session = () =>
      new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", COTAL, "join", "--root", root, "--space", "jk", "--as", "zed"],
        env: { COTAL_HOME: home },
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
    const first = session();
    let out = "";
    const reading = (async () => {
      for await (const c of first.stdout.pipeThrough(new TextDecoderStream())) out += c;
    })();
    await waitFor(() => out.includes("joined space 'jk' as local.zed"), { what: "join" });
    // While it is joined, a second session of the name is refused.
    const twice = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "join", "--root", root, "--space", "jk", "--as", "zed"],
      env: { COTAL_HOME: home },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.notEqual(twice.code, 0);
    assert.match(new TextDecoder().decode(twice.stderr), /local\.zed is joined in another session/);
    first.kill("SIGKILL");
    await first.status;
    await reading;
    await first.stderr.cancel().catch(() => {});
    // Newcomer pass 5: accepted, then lost to the next session of the name.
    await sendText(root, "jk", { to: "local.zed" }, "while you were away");
    // The killed session's presence row ages out (6 s); until then the name reads as joined.
    const adm = await connectBroker({
      servers: (await readMeshRecord(root))!.url,
      creds: await mintForRoot(root, "jk", { profile: "admin" }),
    });
    await waitFor(
      async () =>
        !(await listKeys(await adm.jetstreamManager(), bucketNames("jk").presence))
          .includes("local.zed"),
      { what: "the killed session's presence gone", timeoutMs: 20_000, intervalMs: 500 },
    );
    await adm.close();
    const next = session();
    let got = "";
    const reading2 = (async () => {
      for await (const c of next.stdout.pipeThrough(new TextDecoderStream())) got += c;
    })();
    try {
      await waitFor(() => got.includes("(dm) local.operator: while you were away"), {
        what: "the DM sent while the name was away",
        timeoutMs: 30_000,
      });
      assert.match(got, /took over the session local\.zed left without its cleanup/);
    } finally {
      await next.stdin.close();
      await next.status;
      await reading2;
      await next.stderr.cancel().catch(() => {});
    }
  } finally {
    await down(root);
    await removeTempDir(root);
    await removeTempDir(home);
  }
});
