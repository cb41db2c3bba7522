import assert from "node:assert/strict";
import { connect, credsAuthenticator } from "nats";
import { parseCreds } from "../../lib/nats/mod.ts";
import { decodeJwt } from "../../lib/nats/mod.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

function cotal(args: string[], env: Record<string, string>, cwd?: string) {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    cwd,
    env,
    stdout: "piped",
    stderr: "piped",
  });
}

async function run(args: string[], env: Record<string, string>, cwd?: string) {
  const out = await cotal(args, env, cwd).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

Deno.test("mesh - send reaches tail; mint writes a bounded 0600 cred; any directory finds the mesh", async () => {
  const root = await tempDir("cotal-root-");
  const home = await tempDir("cotal-home-");
  const elsewhere = await tempDir("cotal-cwd-");
  const env = { COTAL_HOME: home };
  try {
    // Started as its own process with its own COTAL_HOME: test files share this process under
    // --parallel, and one that set the variable here raced another's registration.
    const started = await run(
      ["up", "--root", root, "--space", "ops", "--port", String(freePort()), "--detach"],
      env,
      elsewhere,
    );
    assert.equal(started.code, 0, started.stderr);

    // tail runs from an unrelated directory: the machine registry finds the mesh.
    const tailer = cotal(["tail", "--space", "ops", "--count", "1", "--json"], env, elsewhere)
      .spawn();
    const errReader = tailer.stderr.pipeThrough(new TextDecoderStream()).getReader();
    let err = "";
    await waitFor(async () => {
      const { value } = await errReader.read();
      err += value ?? "";
      return err.includes("tailing");
    }, { what: "tail to subscribe" });
    const sent = await run(
      ["send", "--space", "ops", "--channel", "general", "--json", "hello", "mesh"],
      env,
      elsewhere,
    );
    assert.equal(sent.code, 0, sent.stderr);
    const { id } = JSON.parse(sent.stdout);
    const stdout = await new Response(tailer.stdout).text();
    await errReader.cancel();
    assert.equal((await tailer.status).code, 0);
    const line = JSON.parse(stdout.trim());
    assert.equal(line.id, id);
    assert.equal(line.text, "hello mesh");
    assert.equal(line.channel, "general");
    assert.equal(line.from, "local.operator");

    // `--as` a live agent's name speaks for it: said on stderr, and sent all the same.
    const prov = await run(
      [
        ...["mint", "--space", "ops", "--profile", "agent", "--provision", "--actor", "bob"],
        ...["--out", `${elsewhere}/bob.creds`],
      ],
      env,
      elsewhere,
    );
    assert.equal(prov.code, 0, prov.stderr);
    const asBob = await run(
      ["send", "--space", "ops", "--channel", "general", "--as", "bob", "hi"],
      env,
      elsewhere,
    );
    assert.equal(asBob.code, 0, asBob.stderr);
    assert.match(
      asBob.stderr,
      /note: sending as local\.bob, a live agent of space 'ops': its receivers cannot tell this message from its own\./,
    );
    const asCarol = await run(
      ["send", "--space", "ops", "--channel", "general", "--as", "carol", "hi"],
      env,
      elsewhere,
    );
    assert.equal(asCarol.code, 0, asCarol.stderr);
    assert.doesNotMatch(asCarol.stderr, /note:/);
    // A channel with no earlier post: sent, and said, with the near names (newcomer pass 11).
    const typo = await run(
      ["send", "--space", "ops", "--channel", "genral", "typo"],
      env,
      elsewhere,
    );
    assert.equal(typo.code, 0, typo.stderr);
    assert.match(
      typo.stderr,
      /note: #genral has no earlier post in this space's history; did you mean #general\? \(the post is kept/,
    );
    // Provisioning a live actor again names the command that ends the old lifecycle.
    const twice = await run(
      ["mint", "--space", "ops", "--profile", "agent", "--provision", "--actor", "bob"],
      env,
      elsewhere,
    );
    assert.equal(twice.code, 1);
    assert.match(
      twice.stderr,
      /local\.bob still has a live lifecycle \(\w+\): end it with '.*deprovision bob --lifecycle \w+', or provision another --actor\./,
    );

    const credsFile = `${elsewhere}/obs.creds`;
    const minted = await run(
      ["mint", "--space", "ops", "--profile", "observer", "--ttl", "60", "--out", credsFile],
      env,
      elsewhere,
    );
    assert.equal(minted.code, 0, minted.stderr);
    assert.equal((await Deno.stat(credsFile)).mode! & 0o777, 0o600);
    const { jwt } = await parseCreds(await Deno.readTextFile(credsFile));
    const claims = await decodeJwt(jwt);
    assert.ok(claims.exp! - claims.iat! <= 60);
    // The one history consumer an observer may make is named with the rest (red team 30).
    assert.match(minted.stderr, new RegExp(`reads history through .* hist_${claims.sub}$`, "m"));
    // What the CLI handed out is in the space's signing trail, marked as the CLI's.
    const audit = await run(["signer", "audit", "--space", "ops", "--json"], env, elsewhere);
    assert.equal(audit.code, 0, audit.stderr + audit.stdout);
    const handed = (JSON.parse(audit.stdout) as Record<string, unknown>[])
      .filter((e) => e.subject === claims.sub);
    assert.deepEqual(
      handed.map((e) => [e.via, e.profile, e.decision, e.caller, e.ttlSeconds]),
      [["cli", "observer", "allowed", "local.operator", claims.exp! - claims.iat!]],
    );
    const shown = await run(["signer", "audit", "--space", "ops", "--last", "1"], env, elsewhere);
    assert.match(shown.stdout, /allowed local\.operator \(cotal mint\) observer U/);

    // Under `deno task` (which runs in the project's directory and names the caller's in
    // INIT_CWD) a relative --out lands where the user typed it, and the CLI says the full path.
    const typedIn = `${elsewhere}/typed-in`;
    await Deno.mkdir(typedIn);
    const rel = await run(
      ["mint", "--space", "ops", "--profile", "observer", "--out", "rel.creds"],
      { ...env, INIT_CWD: typedIn },
      elsewhere,
    );
    assert.equal(rel.code, 0, rel.stderr);
    assert.ok((await Deno.stat(`${typedIn}/rel.creds`)).isFile);
    assert.match(rel.stderr, new RegExp(`wrote ${typedIn}/rel\\.creds`));
    // A --ttl past the profile's cap is a usage error (exit 2), said in the units it was typed.
    const over = await run(
      ["mint", "--space", "ops", "--profile", "observer", "--ttl", "90d"],
      env,
      elsewhere,
    );
    assert.equal(over.code, 2, over.stderr);
    assert.match(over.stderr, /--ttl: .*of 90 d exceeds the maximum 30 d/);

    // --json says what was minted; an existing --out only with --force; --context writes a NATS
    // CLI context a client connects with as written.
    const xdg = `${elsewhere}/xdg`;
    const envX = { ...env, XDG_CONFIG_HOME: xdg };
    const again = await run(
      ["mint", "--space", "ops", "--profile", "observer", "--out", credsFile, "--context", "c1"],
      envX,
      elsewhere,
    );
    assert.equal(again.code, 1);
    assert.match(again.stderr, /--out ".*obs\.creds" already exists; pass --force to replace it/);
    const forced = await run(
      [
        "mint",
        "--space",
        "ops",
        "--profile",
        "observer",
        "--out",
        credsFile,
        "--force",
        "--context",
        "c1",
        "--json",
      ],
      envX,
      elsewhere,
    );
    assert.equal(forced.code, 0, forced.stderr);
    const report = JSON.parse(forced.stdout);
    const ctx = JSON.parse(await Deno.readTextFile(`${xdg}/nats/context/c1.json`));
    const fresh = decodeJwt((await parseCreds(await Deno.readTextFile(credsFile))).jwt);
    assert.equal(report.subject, (await fresh).sub);
    assert.equal(report.profile, "observer");
    assert.equal(report.inboxPrefix, `_INBOX_${report.subject}`);
    assert.equal(report.context, `${xdg}/nats/context/c1.json`);
    assert.ok(Date.parse(report.expiresAt) > Date.now());
    assert.deepEqual(
      { creds: ctx.creds, inbox_prefix: ctx.inbox_prefix },
      { creds: credsFile, inbox_prefix: report.inboxPrefix },
    );
    assert.equal(ctx.url, JSON.parse(await Deno.readTextFile(`${root}/run/mesh.json`)).url);
    const viaContext = await connect({
      servers: ctx.url,
      authenticator: credsAuthenticator(await Deno.readFile(ctx.creds)),
      inboxPrefix: ctx.inbox_prefix,
    });
    await viaContext.flush();
    await viaContext.close();
    const noOut = await run(
      ["mint", "--space", "ops", "--profile", "observer", "--context", "c2"],
      envX,
      elsewhere,
    );
    assert.equal(noOut.code, 2);
    assert.match(noOut.stderr, /--context needs --out <file>/);
    // The help names each profile with its default and its longest lifetime.
    assert.match(
      (await run(["mint", "--help"], env, elsewhere)).stdout,
      /agent \(1d, at most 7d\), observer \(1d, at most 30d\)/,
    );

    for (
      const [args, re] of [
        [["mint", "--space", "ops", "--profile", "root"], /'root' is not a Cotal profile/],
        [
          ["mint", "--space", "ops", "--profile", "observer", "--ttl", "1e9"],
          /--ttl takes seconds or a number with s, m, h or d \(3600, 90m, 12h, 1d\), not '1e9'/,
        ],
        [["send", "--space", "ops", "hi"], /exactly one of --channel, --to or --role/],
        [["send", "--space", "ops", "--channel", "general", " "], /The message is empty/],
        [
          ["send", "--space", "ops", "--channel", "general", "--as", "bad.name", "x"],
          /--as takes an actor name of 1-64 characters of \[A-Za-z0-9_\] \(the owner is local\), not 'bad\.name'/,
        ],
        [
          ["ps", "--space", "opz", "--root", root],
          /Space 'opz' has no account under .*, which serves 'ops': pass --space with one of them/,
        ],
        [["send", "--space", "ops", "--channel", "a", "--role", "b", "hi"], /exactly one/],
        // DM and TASK keep only what a durable waits for: refused, not sent into nothing.
        [
          ["send", "--space", "ops", "--to", "local.nobody", "hi"],
          /local\.nobody has no live agent in space 'ops', so a DM to it would not be kept/,
        ],
        // An agent's name as spawn and ps print it: told its principal.
        [
          ["send", "--space", "ops", "--to", "upper_1", "hi"],
          /'upper_1' is not a principal: a DM goes to <owner>\.<actor>, and an agent or session named upper_1 is local\.upper_1/,
        ],
        [
          ["send", "--space", "ops", "--role", "nobody", "hi"],
          /No agent in space 'ops' was ever given the role 'nobody'/,
        ],
        [
          ["tail", "--space", "no-such-space"],
          /No mesh on this machine serves space 'no-such-space' .*serve 'ops'/,
        ],
        [["space", "add", "bad.name"], /'bad.name' is not a usable space name/],
      ] as const
    ) {
      const r = await run([...args], env, elsewhere);
      assert.notEqual(r.code, 0, args.join(" "));
      assert.match(r.stderr, re, args.join(" "));
    }
    const huge = await run(
      ["mint", "--space", "ops", "--profile", "observer", "--ttl", "999999999"],
      env,
      elsewhere,
    );
    assert.equal(huge.code, 2, "a --ttl over the cap is a usage error");
    assert.match(huge.stderr, /above|maximum|exceeds/i);
    // The lifetimes as --help writes them (newcomer pass 5): 1d is a day, 31d over the cap.
    const day = await run(
      ["mint", "--space", "ops", "--profile", "observer", "--ttl", "1d", "--json"],
      env,
      elsewhere,
    );
    assert.equal(day.code, 0, day.stderr);
    const left = Date.parse(JSON.parse(day.stdout).expiresAt) - Date.now();
    assert.ok(left > 86_000_000 && left <= 86_400_000, day.stdout);
    const month = await run(
      ["mint", "--space", "ops", "--profile", "observer", "--ttl", "31d"],
      env,
      elsewhere,
    );
    assert.equal(month.code, 2);

    // An up of a new root while this one runs says so (newcomer pass 11 forgot a cd) ...
    const second = `${elsewhere}/second`;
    const up2 = await run(
      ["up", "--root", second, "--space", "ops2", "--port", String(freePort()), "--detach"],
      env,
      elsewhere,
    );
    assert.equal(up2.code, 0, up2.stderr);
    assert.match(
      up2.stderr,
      new RegExp(`note: this machine already runs a mesh under ${root}; this up starts another`),
    );
    assert.equal((await run(["down", "--root", second], env, elsewhere)).code, 0);
    // ... and a down that found its root through the registry names it before it stops it.
    const stopped = await run(["down"], env, elsewhere);
    assert.equal(stopped.code, 0, stopped.stderr);
    assert.match(
      stopped.stderr,
      new RegExp(
        `^stopping the mesh under ${root} \\(no \\./\\.cotal here: the machine's registry\\)`,
      ),
    );
  } finally {
    await run(["down", "--root", root], env, elsewhere);
    for (const d of [root, home, elsewhere]) await removeTempDir(d);
  }
});

Deno.test("mesh - spawn without a program is a usage error (exit 2) naming what to add, before any mesh is looked for", async () => {
  const home = await tempDir("cotal-home-");
  try {
    const env = { COTAL_HOME: home, PATH: "/usr/bin:/bin" };
    for (const agent of [[], ["--agent", "program"]]) {
      const r = await run(["spawn", "--name", "w", ...agent], env, home);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /agent needs a program: give its absolute path and args after --/);
    }
    const mod = await run(["spawn", "--agent", "module"], env, home);
    assert.equal(mod.code, 2, mod.stderr);
    assert.match(mod.stderr, /The module agent needs --module <file\.ts>/);
  } finally {
    await removeTempDir(home);
  }
});
