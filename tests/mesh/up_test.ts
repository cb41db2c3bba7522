import assert from "node:assert/strict";
import { connect } from "nats";
import { readPidFile } from "../../lib/mesh/pidfile.ts";
import { componentFiles } from "../../lib/mesh/stack.ts";
import { loadSpaceAccount } from "../../lib/mesh/trust_state.ts";
import { credsAuthenticatorFast, mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { membershipRwCredsKey, workspaceSecretStore } from "../../lib/workspace/mod.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";
import { expectRefused } from "../_harness/refused.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

async function cotal(args: string[], cwd?: string, env?: Record<string, string>) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    cwd,
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return false;
  }
}

Deno.test("mesh - up --detach, a second up changes nothing, status, down leaves no process", async () => {
  const root = await tempDir("cotal-root-");
  const port = freePort();
  try {
    const first = await cotal(["up", "--detach", "--json", "--root", root, "--port", `${port}`]);
    assert.equal(first.code, 0, first.stderr);
    const r1 = JSON.parse(first.stdout);
    assert.deepEqual(r1.started, [
      "nats-server",
      "delivery.default",
      // The signer before the supervisor, which signs through it.
      "signer.default",
      "supervise.default",
      // Two watchdogs: each heals the other (fault pass 7). Started first (fault pass 12),
      // reported last.
      "watchdog",
      "watchdog-peer",
    ]);
    assert.deepEqual(r1.spaces, ["default"]);
    const pid1 = (await readPidFile(componentFiles(root, "nats-server").pidFile))!.pid;

    const second = await cotal(["up", "--detach", "--json", "--root", root, "--port", `${port}`]);
    assert.equal(second.code, 0, second.stderr);
    assert.deepEqual(JSON.parse(second.stdout).started, []);
    // Its progress (stderr under --json) says the stack was already up, not a fresh start.
    assert.match(
      second.stderr,
      /^already up: nats-server, delivery\.default, signer\.default, supervise\.default/m,
    );
    assert.equal((await readPidFile(componentFiles(root, "nats-server").pidFile))!.pid, pid1);

    const status = await cotal(["status", "--json", "--root", root]);
    assert.equal(status.code, 0);
    const st = JSON.parse(status.stdout);
    assert.equal(st.healthy, true);
    // The isolation in force, as the running supervisor reports it.
    assert.match(st.isolation.default, /bwrap .* \+ Deno permissions|Deno permissions only/);
    // It signs through the space's cotal-signer and holds no seed.
    assert.match(st.signing.default, /^remote: the supervisor holds no seed/);
    assert.deepEqual(
      st.creds.map((c: { kind: string; status: string }) => `${c.kind}:${c.status}`).sort(),
      [
        "connection-evictor.creds:healthy",
        "delivery.creds:healthy",
        "membership-observer.creds:healthy",
        "membership-rw.creds:healthy",
        "supervisor.creds:healthy",
      ],
    );
    // A damaged cred turns status unhealthy and doctor names it, without echoing its bytes.
    const rwKey = membershipRwCredsKey("default", { root });
    const store = workspaceSecretStore(root);
    const good = (await store.get(rwKey))!;
    await store.put(rwKey, "not a creds file SECRETBYTES");
    const doctor = await cotal(["doctor", "auth", "--json", "--root", root]);
    assert.equal(doctor.code, 1);
    const row = JSON.parse(doctor.stdout).creds.find((r: { kind: string }) =>
      r.kind === "membership-rw.creds"
    );
    assert.equal(row.status, "unreadable");
    assert.ok(!doctor.stdout.includes("SECRETBYTES"));
    assert.equal((await cotal(["status", "--json", "--root", root])).code, 1);
    await store.put(rwKey, good);

    // The broker runs in operator mode and the space's streams exist: a cred minted from the
    // root's own trust record reads them; an unauthenticated client is refused.
    const account = (await loadSpaceAccount(workspaceSecretStore(root), "default"))!;
    const creds = await mintCreds(
      { space: "default", account: account.account },
      await newIdentity(),
      "provisioner",
    );
    const nc = await connect({
      servers: r1.url,
      authenticator: credsAuthenticatorFast(creds),
    }).catch((e) => e);
    if (nc instanceof Error) throw nc;
    await nc.close();
    const refused = await expectRefused(() => connect({ servers: r1.url, reconnect: false }));
    assert.match(refused.message, /Authorization/i);

    // The delivery daemon's set-aside records, through its admin rail: none on a fresh mesh.
    const dead = await cotal(["dead-letters", "--root", root]);
    assert.equal(dead.code, 0, dead.stderr);
    assert.equal(dead.stdout.trim(), "nothing set aside");
    const deadJson = JSON.parse((await cotal(["dead-letters", "--json", "--root", root])).stdout);
    assert.deepEqual(deadJson, { deadLetters: [], gaps: [], told: [], trimmed: [] });

    const down = await cotal(["down", "--root", root]);
    assert.equal(down.code, 0, down.stderr);
    assert.match(down.stdout, /nats-server: stopped/);
    // Named as status names them, by space, not by the space's key.
    assert.match(down.stdout, /^delivery\.default: stopped$/m);
    assert.match(down.stdout, /^supervise\.default: stopped$/m);
    assert.equal(alive(pid1), false);
    const after = await cotal(["status", "--json", "--root", root]);
    assert.equal(after.code, 1);
    // Said as a command this machine can run: the installed cotal, or the npx form.
    const said = await cotal(["status", "--root", root]);
    assert.match(
      said.stdout + said.stderr,
      /start it with '(cotal|npx -y deno@\d+\.\d+\.\d+ task cotal) up --root \/\S+'/,
    );
  } finally {
    await cotal(["down", "--root", root]);
    await removeTempDir(root);
  }
});

Deno.test("mesh - bad input to up gets one sentence and a non-zero exit", async () => {
  for (
    const [args, re] of [
      [["up", "--port", "99999"], /--port must be a whole number from 1 to 65535/],
      [["up", "--bogus"], /Unknown flag --bogus/],
      [["up", "--port", "1", "--port", "2"], /given 2 times/],
      [["frobnicate"], /Unknown command "frobnicate"/],
    ] as const
  ) {
    const r = await cotal([...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, re);
  }
});

Deno.test("mesh - up refuses a port something else listens on", async () => {
  const root = await tempDir("cotal-root-");
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const r = await cotal([
      "up",
      "--detach",
      "--root",
      root,
      "--port",
      `${(l.addr as Deno.NetAddr).port}`,
    ]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /is already in use; stop what listens there or pass --port/);
  } finally {
    l.close();
    await removeTempDir(root);
  }
});

Deno.test("mesh - a foreground up over a detached stack attaches, and Ctrl-C leaves the stack running", async () => {
  const root = await tempDir("cotal-root-");
  const port = freePort();
  try {
    const first = await cotal(["up", "--detach", "--root", root, "--port", `${port}`]);
    assert.equal(first.code, 0, first.stderr);
    const broker = (await readPidFile(componentFiles(root, "nats-server").pidFile))!;
    const fg = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "up", "--root", root, "--port", `${port}`],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let out = "";
    const reading = (async () => {
      for await (const c of fg.stdout.pipeThrough(new TextDecoderStream())) out += c;
    })();
    try {
      await waitFor(() => out.includes("attached to the detached stack"), {
        timeoutMs: 30_000,
        what: "the foreground up attaching",
      });
    } finally {
      fg.kill("SIGINT");
    }
    const st = await fg.status;
    await reading;
    await fg.stderr.cancel();
    assert.equal(st.code, 0, out);
    assert.match(out, /detached; the stack keeps running/);
    assert.ok(alive(broker.pid), "the broker still runs after the foreground up's Ctrl-C");
    assert.equal((await cotal(["status", "--root", root])).code, 0);
  } finally {
    await cotal(["down", "--root", root]);
    await removeTempDir(root);
  }
});

Deno.test("mesh - up over a stack another foreground up runs and heals is refused, naming it; once that up is gone, up --detach takes over", async () => {
  const root = await tempDir("cotal-root-");
  const port = freePort();
  // A machine registry of its own: the suite's other meshes come and go in the shared one.
  const env = { COTAL_HOME: await tempDir("cotal-home-") };
  const fg = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, "up", "--root", root, "--port", `${port}`],
    env,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "";
  const reading = (async () => {
    for await (const c of fg.stdout.pipeThrough(new TextDecoderStream())) out += c;
  })();
  let killed = false;
  try {
    await waitFor(() => out.includes("press Ctrl-C"), {
      timeoutMs: 60_000,
      what: "the foreground up serving",
    });
    // No watchdog component under a foreground up: status names the up that heals instead
    // (newcomer pass 11).
    const healing = await cotal(["status", "--root", root, "--json"], undefined, env);
    assert.deepEqual(JSON.parse(healing.stdout).healedBy, { foregroundUp: fg.pid });
    assert.match(
      (await cotal(["status", "--root", root], undefined, env)).stdout,
      new RegExp(`^healing: the foreground 'cotal up' \\(pid ${fg.pid}\\) restarts what dies`, "m"),
    );
    // Newcomer pass 5: this started a second watchdog, and both restarted the same daemons.
    for (const args of [["up", "--detach"], ["up"]]) {
      const r = await cotal([...args, "--root", root, "--port", `${port}`], undefined, env);
      assert.equal(r.code, 1, `${args.join(" ")}: ${r.stdout}`);
      assert.match(
        r.stderr,
        new RegExp(`runs in the foreground of another 'cotal up' \\(pid ${fg.pid}\\)`),
      );
    }
    // From another root (an up run from another directory), the port is named as this mesh's.
    const other = await tempDir("cotal-root-");
    try {
      const r = await cotal(
        ["up", "--detach", "--root", other, "--port", `${port}`],
        undefined,
        env,
      );
      assert.equal(r.code, 1);
      assert.ok(
        r.stderr.includes(`is already in use by the Cotal mesh under ${root}; to use it`),
        r.stderr,
      );
    } finally {
      await removeTempDir(other);
    }
    // The foreground up dies without its Ctrl-C: it no longer heals the stack, so an up may.
    fg.kill("SIGKILL");
    killed = true;
    await fg.status;
    // Its daemons died with it (parent-death signal): said as such, with the way back.
    // All of them: a daemon's parent-death signal is a SIGTERM, and its graceful stop against a
    // broker that died too takes a few seconds (each step against the broker is bounded: 5 s
    // in delivery's shutdown); an up in the meantime found it still running.
    let last = "";
    await waitFor(async () => {
      const st = await cotal(["status", "--root", root], undefined, env);
      last = st.stdout;
      return st.code === 1 && /nats-server +not running \(pid \d+ is gone\)/.test(st.stdout) &&
        /restart what is not running: .* up --root /.test(st.stdout) &&
        !/^\S+ +running \(pid /m.test(st.stdout);
    }, { what: "status naming what died", timeoutMs: 60_000 }).catch(async (err) => {
      const logs = await Array.fromAsync(Deno.readDir(`${root}/logs`)).catch(() => []);
      let tails = "";
      for (const e of logs) {
        const text = await Deno.readTextFile(`${root}/logs/${e.name}`).catch(() => "");
        tails += `\n--- ${e.name}\n${text.trim().split("\n").slice(-8).join("\n")}`;
      }
      throw new Error(`${err.message}; the last status:\n${last}\nlogs:${tails}`);
    });
    const taken = await cotal(
      ["up", "--detach", "--root", root, "--port", `${port}`],
      undefined,
      env,
    );
    assert.equal(taken.code, 0, taken.stderr);
    const status = await cotal(["status", "--root", root], undefined, env);
    assert.equal(status.code, 0, status.stdout);
    // Which root it found and the broker a client dials (newcomer pass 5).
    assert.ok(status.stdout.startsWith(`root:    ${root}\nbroker:  nats://127.0.0.1:${port}\n`));
    // A component's log by the name status gives it, its lines timestamped.
    await waitFor(
      async () =>
        /^\d{4}-\d\d-\d\dT\S+ cotal-delivery: info: delivery daemon up/m.test(
          (await cotal(
            ["logs", "delivery.default", "--root", root, "--lines", "20"],
            undefined,
            env,
          )).stdout,
        ),
      { what: "the delivery daemon's log through cotal logs", timeoutMs: 20_000 },
    );
    // --json, as the other read commands (newcomer pass 8): the lines exact.
    const asJson = await cotal(
      ["logs", "delivery.default", "--root", root, "--json"],
      undefined,
      env,
    );
    assert.equal(asJson.code, 0, asJson.stderr);
    const j = JSON.parse(asJson.stdout);
    assert.equal(j.component, "delivery.default");
    assert.ok(j.lines.some((l: string) => /delivery daemon up/.test(l)), asJson.stdout);
    // No component: the list of logs, by the names status gives (newcomer pass 11).
    const list = await cotal(["logs", "--root", root], undefined, env);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^delivery\.default +\d+ bytes$/m);
    assert.match(list.stdout, /^nats-server +\d+ bytes$/m);
    assert.doesNotMatch(list.stdout, /[0-9a-f]{32}/, "no hashed names");
    const listJson = JSON.parse(
      (await cotal(["logs", "--root", root, "--json"], undefined, env)).stdout,
    );
    assert.ok(listJson.logs.some((l: { component: string }) => l.component === "signer.default"));
    const unknown = await cotal(["logs", "delivery.nope", "--root", root], undefined, env);
    assert.equal(unknown.code, 1);
    assert.match(
      unknown.stderr,
      /No log for "delivery\.nope" .*; the logs are: .*delivery\.default.*\(an agent's own output is 'cotal attach <name>'\)/,
    );
  } finally {
    if (!killed) fg.kill("SIGINT");
    await fg.status;
    await reading;
    await fg.stderr.cancel().catch(() => {});
    await cotal(["down", "--root", root], undefined, env);
    await removeTempDir(root);
  }
});

Deno.test("mesh - a terminal's Ctrl-C on a foreground up (its whole process group) despawns the agents, as down does, not just the up", () =>
  terminalStops("SIGINT"));

Deno.test("mesh - closing the terminal of a foreground up (SIGHUP to its process group) stops it as Ctrl-C does", () =>
  terminalStops("SIGHUP"));

async function terminalStops(signal: "SIGINT" | "SIGHUP") {
  const root = await tempDir("cotal-root-");
  const port = freePort();
  // As a terminal runs it: its own process group, which the Ctrl-C is sent to.
  const fg = new Deno.Command("/usr/bin/setsid", {
    args: [Deno.execPath(), "run", "-A", COTAL, "up", "--root", root, "--port", `${port}`],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "";
  const reading = (async () => {
    for await (const c of fg.stdout.pipeThrough(new TextDecoderStream())) out += c;
  })();
  let stopped = false;
  try {
    await waitFor(() => out.includes("press Ctrl-C"), {
      timeoutMs: 60_000,
      what: "the foreground up serving",
    });
    const spawned = await cotal([
      ...["spawn", "--root", root, "--role", "upper", "--", "/bin/sh", "-c", "tr a-z A-Z"],
    ]);
    assert.equal(spawned.code, 0, spawned.stderr);
    Deno.kill(-fg.pid, signal);
    const st = await fg.status;
    stopped = true;
    // Its last lines may still be in the pipe when it has exited: read to the end first (a
    // loaded run asserted on what had arrived, without the down's lines).
    await reading;
    assert.equal(st.code, 0, out);
    assert.match(out, /stopping/);
    // Said as down says it (newcomer pass 6).
    assert.match(out, /agents\.default: despawned upper_1/);
    assert.match(out, /nats-server: stopped/);
    const again = await cotal(["up", "--detach", "--root", root, "--port", `${port}`]);
    assert.equal(again.code, 0, again.stderr);
    assert.doesNotMatch(again.stdout, /brought back/);
  } finally {
    if (!stopped) {
      try {
        Deno.kill(-fg.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
      await fg.status;
    }
    await reading;
    await fg.stderr.cancel().catch(() => {});
    await cotal(["down", "--root", root]);
    await removeTempDir(root);
  }
}

Deno.test("mesh - down from another shell stops a foreground up's stack for good: its up stops, nothing restarts", () =>
  downStopsForeground(false));

Deno.test("mesh - down --keep-agents stops a foreground up as down does, its agents kept for the next up (not a SIGKILL)", () =>
  downStopsForeground(true));

async function downStopsForeground(keepAgents: boolean) {
  const root = await tempDir("cotal-root-");
  const port = freePort();
  const fg = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, "up", "--root", root, "--port", `${port}`],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "";
  const reading = (async () => {
    for await (const c of fg.stdout.pipeThrough(new TextDecoderStream())) out += c;
  })();
  let done = false;
  try {
    await waitFor(() => out.includes("press Ctrl-C"), {
      timeoutMs: 60_000,
      what: "the foreground up serving",
    });
    if (keepAgents) {
      const spawned = await cotal(["spawn", "--root", root, "--role", "upper", "--", "/bin/cat"]);
      assert.equal(spawned.code, 0, spawned.stderr);
    }
    // Newcomer pass 6: down said stopped, and the foreground up's watchdog restarted it all.
    const d = await cotal(["down", "--root", root, ...(keepAgents ? ["--keep-agents"] : [])]);
    assert.equal(d.code, 0, d.stderr);
    assert.match(d.stdout, new RegExp(`up: the foreground up \\(pid ${fg.pid}\\) stopped`));
    const st = await fg.status;
    done = true;
    await reading;
    // Newcomers 9 and 10: with --keep-agents the up was SIGKILLed (exit 137, no down of its own).
    assert.equal(st.code, 0, out);
    await new Promise((r) => setTimeout(r, 1_000));
    const status = await cotal(["status", "--root", root]);
    assert.notEqual(status.code, 0);
    assert.doesNotMatch(out, /restarted nats-server/);
    if (keepAgents) {
      assert.match(out, /stopping \(agents kept for the next up\)/);
      assert.match(out, /agents\.default: kept upper_1 \(the next up brings them back\)/);
      assert.match(out, /nats-server: stopped/);
      const again = await cotal(["up", "--detach", "--root", root, "--port", `${port}`]);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stdout, /brought back upper_1/);
    }
  } finally {
    if (!done) fg.kill("SIGKILL");
    await fg.status;
    await reading;
    await fg.stderr.cancel().catch(() => {});
    await cotal(["down", "--root", root]);
    await removeTempDir(root);
  }
}
