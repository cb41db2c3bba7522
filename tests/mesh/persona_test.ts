/**
 * Personas: `<root>/personas/<name>.md` parsed strictly (every refusal names the file, the line
 * and the field), listed and shown by `cotal persona`, and spawned by name: `cotal spawn
 * reviewer` launches a claude-code agent with the persona's role, channels, model, env and
 * instructions (judged by the stand-in harness inside the real sandbox).
 */
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { parsePersona } from "../../lib/mesh/persona.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";
import { jsonFileReady } from "../_harness/files.ts";
import { agentWorkdir } from "../manager/_agent_fixture.ts";
import { STAND_IN } from "../manager/_stand_in_harness.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

async function cotal(args: string[], env?: Record<string, string>) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    ...(env ? { env } : {}),
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

const REVIEWER = `---
agent: claude-code
role: reviewer
channels: [general, "reviews"]
model: claude-sonnet-4-5
description: reviews the diffs it is sent
env: [REVIEWER_API_KEY]
---
You review pull requests.
Be brief.
`;

Deno.test("persona - the front matter is parsed strictly, every refusal naming file, line and field", () => {
  const p = parsePersona("reviewer", "/r/personas/reviewer.md", REVIEWER);
  assert.deepEqual(
    [p.agent, p.role, p.channels, p.model, p.description, p.env, p.instructions],
    [
      "claude-code",
      "reviewer",
      ["general", "reviews"],
      "claude-sonnet-4-5",
      "reviews the diffs it is sent",
      ["REVIEWER_API_KEY"],
      "You review pull requests.\nBe brief.",
    ],
  );
  for (
    const [text, why] of [
      ["agent: x\n", /f\.md:1: front matter: the file must start with ---/],
      ["---\nagent: x\n", /f\.md:3: front matter: no closing --- line/],
      ["---\nagent: x\nspawns: [a]\n---\n", /f\.md:3: spawns: not a persona field/],
      ["---\nagent: x\nspawn: true\n---\n", /f\.md:3: spawn: must be a list of at most 8 persona/],
      [
        "---\nagent: x\nspawn: [../x]\n---\n",
        /f\.md:3: spawn: must be a list of at most 8 persona/,
      ],
      ["---\nrole: r\n---\n", /f\.md:1: agent: missing/],
      ["---\nagent: x\nagent: y\n---\n", /f\.md:3: agent: set twice/],
      ["---\nagent: x\nchannels: [a, b\n---\n", /f\.md:3: channels: a list must end with '\]'/],
      ["---\nagent: x\nchannels: general\n---\n", /f\.md:3: channels: must be a list/],
      ["---\nagent: x\n  - nested\n---\n", /f\.md:3: front matter: each line must be 'key: value'/],
      ['---\nagent: "x\n---\n', /f\.md:2: agent: a quoted value must end with its quote/],
      ["---\nagent: x\nenv: [lower]\n---\n", /f\.md:3: env: must be a list of variable names/],
      ["---\nagent: x\nenv: KEY\n---\n", /f\.md:3: env: must be a list of variable names/],
      ["---\nagent: x\ncommand: sh\n---\n", /f\.md:3: command: must be an absolute path/],
      ["---\nagent: x\nargs: -c\n---\n", /f\.md:3: args: must be a list/],
    ] as const
  ) {
    assert.throws(
      () => parsePersona("f", "/r/f.md", text),
      (e: unknown) => isCotalError(e, "persona_invalid") && why.test((e as Error).message),
      text,
    );
  }
});

Deno.test("persona - cotal persona list|show, and cotal spawn <persona> launching its harness with its role, channels, model and instructions", async () => {
  const root = `${await tempDir("cotal-persona-")}/.cotal`;
  const work = await agentWorkdir("cotal-persona-work-");
  const standIn = `${work}/claude`;
  const record = `${work}/record.json`;
  try {
    const up = await cotal(["up", "--detach", "--root", root, "--port", `${freePort()}`]);
    assert.equal(up.code, 0, up.stderr);
    await Deno.mkdir(`${root}/personas`);
    await Deno.writeTextFile(`${root}/personas/reviewer.md`, REVIEWER);
    await Deno.writeTextFile(standIn, STAND_IN, { mode: 0o755 });
    await Deno.chmod(standIn, 0o755);

    const list = await cotal(["persona", "list", "--root", root]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^reviewer +claude-code +reviewer +reviews the diffs it is sent$/m);
    const show = await cotal(["persona", "show", "reviewer", "--root", root]);
    assert.match(
      show.stdout,
      /channels: general, reviews\nmodel: claude-sonnet-4-5\nenv: REVIEWER_API_KEY\nmay spawn: -\ncommand: -\n\nYou review/,
    );
    assert.match(show.stdout, /^description: reviews the diffs it is sent$/m);

    // The persona's env names a variable of this shell: the agent gets it.
    Deno.env.set("REVIEWER_API_KEY", "persona-key");
    const spawned = await cotal([
      "spawn",
      "reviewer",
      "--root",
      root,
      "--workdir",
      work,
      "--",
      standIn,
      record,
    ]);
    assert.equal(spawned.code, 0, spawned.stderr);
    await waitFor(() => jsonFileReady(record), {
      timeoutMs: 60_000,
      what: "the stand-in's record",
    });
    const rec = JSON.parse(await Deno.readTextFile(record));
    assert.equal(rec.error, undefined, rec.error);
    assert.deepEqual(rec.argv.slice(2), [
      "--strict-mcp-config",
      "--append-system-prompt",
      "You review pull requests.\nBe brief.",
      "--model",
      "claude-sonnet-4-5",
      record,
    ]);
    assert.ok(rec.tools.includes("wait"));
    assert.ok(rec.env.includes("REVIEWER_API_KEY"), rec.env.join(" "));
    const ps = JSON.parse((await cotal(["ps", "--root", root, "--json"])).stdout);
    const row = ps.agents.find((a: { name: string }) => a.name === "reviewer_1");
    assert.equal(row?.agent, "claude-code");
    assert.equal(row?.role, "reviewer");

    // Refusals: a persona that is not there names the ones that are; a bad one its line.
    const nosuch = await cotal(["spawn", "nosuch", "--root", root]);
    assert.equal(nosuch.code, 2);
    assert.match(nosuch.stderr, /There is no persona 'nosuch' .*; the personas are: reviewer;/);
    // A program given by name, not path (newcomer pass 5): both readings are said.
    const byName = await cotal([
      "spawn",
      "--root",
      root,
      "--agent",
      "program",
      "--",
      "sh",
      "-c",
      "x",
    ]);
    assert.equal(byName.code, 2);
    assert.match(
      byName.stderr,
      /There is no persona 'sh' .*; a program is given after -- by its absolute path \(e\.g\. -- \/bin\/sh -c/,
    );
    await Deno.writeTextFile(`${root}/personas/bad.md`, "---\nagent: program\nrole [x]\n---\n");
    const bad = await cotal(["spawn", "bad", "--root", root]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /personas\/bad\.md:3: front matter: each line must be 'key: value'/);
    // With a file that does not parse beside it, a lookup still names the good ones (newcomer
    // pass 11 read "the personas are: none").
    const beside = await cotal(["persona", "show", "nosuch", "--root", root]);
    assert.equal(beside.code, 2);
    assert.match(
      beside.stderr,
      /the personas are: reviewer \(and bad, which do not parse: '.*persona list' says why\)/,
    );
    // A task runner's persona names its program: spawned by name alone.
    await Deno.writeTextFile(
      `${root}/personas/shouter.md`,
      "---\nagent: task-runner\nrole: shout\ncommand: /bin/sh\nargs: [-c, 'tr a-z A-Z']\n---\n",
    );
    const shouter = await cotal(["spawn", "shouter", "--root", root, "--json"]);
    assert.equal(shouter.code, 0, shouter.stderr);
    assert.equal(JSON.parse(shouter.stdout).agent, "task-runner");
    assert.match(
      (await cotal(["persona", "show", "shouter", "--root", root])).stdout,
      /^command: \/bin\/sh -c 'tr a-z A-Z'$/m,
    );
    await Deno.remove(`${root}/personas/shouter.md`);
    // The listing names the bad file and fails, and still shows the good ones.
    // So is one naming a connector nobody registered, which only spawn used to refuse
    // (newcomer pass 11).
    await Deno.writeTextFile(`${root}/personas/ghost.md`, "---\nagent: no-such-harness\n---\n");
    const listed = await cotal(["persona", "list", "--root", root]);
    assert.equal(listed.code, 1);
    assert.match(listed.stderr, /bad\.md:3: front matter/);
    assert.match(
      listed.stderr,
      /persona ghost \(.*ghost\.md\): No connector "no-such-harness" is registered \(known: .*claude-code/,
    );
    assert.match(listed.stdout, /^reviewer +claude-code/m);
    await Deno.remove(`${root}/personas/ghost.md`);

    // A persona that may spawn another: cotal spawn resolves the child (its harness on this
    // PATH, its variables from this shell) into the request, and its cotal mcp offers it.
    await Deno.writeTextFile(
      `${root}/personas/lead.md`,
      "---\nagent: claude-code\nrole: lead\nspawn: [reviewer]\n---\nYou lead.\n",
    );
    const leadRecord = `${work}/lead.json`;
    const path = `${work}:${Deno.env.get("PATH")}`;
    const lead = await cotal(
      ["spawn", "lead", "--root", root, "--workdir", work, "--", standIn, leadRecord],
      { PATH: path },
    );
    assert.equal(lead.code, 0, lead.stderr);
    await waitFor(() => jsonFileReady(leadRecord), { timeoutMs: 60_000, what: "lead's record" });
    const leadRec = JSON.parse(await Deno.readTextFile(leadRecord));
    assert.equal(leadRec.error, undefined, leadRec.error);
    assert.deepEqual(leadRec.schemas.spawn.properties.persona.enum, ["reviewer"]);
    assert.match(
      (await cotal(["persona", "show", "lead", "--root", root])).stdout,
      /may spawn: reviewer\n/,
    );
    // Refused before anything runs: a child that may spawn too; a child's harness not on PATH;
    // a child's variable not set in this shell.
    await Deno.writeTextFile(
      `${root}/personas/chain.md`,
      "---\nagent: claude-code\nspawn: [lead]\n---\n",
    );
    const chain = await cotal(["spawn", "chain", "--root", root, "--", standIn], { PATH: path });
    assert.equal(chain.code, 1);
    assert.match(
      chain.stderr,
      /chain\.md: spawn: lead may spawn agents of its own .*children may not/,
    );
    const noHarness = await cotal(["spawn", "lead", "--root", root, "--", standIn], {
      PATH: "/usr/bin:/bin",
    });
    assert.equal(noHarness.code, 1);
    assert.match(noHarness.stderr, /spawn: reviewer needs claude on this shell's PATH/);
    Deno.env.delete("REVIEWER_API_KEY");
    const noKey = await cotal(["spawn", "lead", "--root", root, "--", standIn], { PATH: path });
    assert.equal(noKey.code, 2);
    assert.match(noKey.stderr, /REVIEWER_API_KEY is not set in this shell/);
  } finally {
    Deno.env.delete("REVIEWER_API_KEY");
    await cotal(["down", "--root", root]);
    await removeTempDir(root.replace(/\/\.cotal$/, ""));
    await removeTempDir(work);
  }
});
